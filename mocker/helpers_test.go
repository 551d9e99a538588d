package mocker

import (
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// t0 is the virtual epoch of every test.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// testWorker is the worker of tests that do not care which.
var testWorker = routing.Worker{ID: 1}

// timedReq is a request and its arrival offset.
type timedReq struct {
	at  time.Duration
	req Request
}

// drive submits reqs at their arrival times and advances e event by event
// until it is idle, calling each after every Advance. It returns the number
// of requests Submit refused.
func drive(e *Engine, reqs []timedReq, each func(StepResult) error) (refused int, err error) {
	i := 0
	for {
		next, busy := e.NextEventTime()
		if i < len(reqs) && (!busy || !t0.Add(reqs[i].at).After(next)) {
			if e.Submit(reqs[i].req, t0.Add(reqs[i].at)) != nil {
				refused++
			}
			i++
			continue
		}
		if !busy {
			return refused, nil
		}
		if err := each(e.Advance(next)); err != nil {
			return refused, err
		}
	}
}

// kvModel is the cache contents as rebuilt from events: engine id to the
// block's local hash and parent.
type kvModel struct {
	blocks map[routing.EngineHash]modelBlock
	lastID uint64
}

type modelBlock struct {
	local     routing.LocalHash
	parent    routing.EngineHash
	hasParent bool
}

func newKVModel() *kvModel { return &kvModel{blocks: make(map[routing.EngineHash]modelBlock)} }

// apply replays events, checking ids are contiguous and that every event is
// consistent with the model (no double store, no unknown removal or parent).
func (m *kvModel) apply(evs []routing.Event) error {
	for _, ev := range evs {
		if ev.ID != m.lastID+1 {
			return fmt.Errorf("event id %d after %d", ev.ID, m.lastID)
		}
		m.lastID = ev.ID
		if err := m.applyOne(ev); err != nil {
			return fmt.Errorf("event %d: %w", ev.ID, err)
		}
	}
	return nil
}

func (m *kvModel) applyOne(ev routing.Event) error {
	if err := ev.Validate(); err != nil {
		return err
	}
	switch ev.Kind {
	case routing.EventStored:
		return m.store(ev)
	case routing.EventRemoved:
		for _, h := range ev.Removed {
			if _, ok := m.blocks[h]; !ok {
				return fmt.Errorf("removed unknown block %x", h)
			}
			delete(m.blocks, h)
		}
	case routing.EventCleared:
		clear(m.blocks)
	}
	return nil
}

func (m *kvModel) store(ev routing.Event) error {
	parent, has := ev.Parent, ev.HasParent
	for _, b := range ev.Blocks {
		if _, ok := m.blocks[b.Engine]; ok {
			return fmt.Errorf("stored block %x twice", b.Engine)
		}
		if _, ok := m.blocks[parent]; has && !ok {
			return fmt.Errorf("stored block %x under unknown parent %x", b.Engine, parent)
		}
		m.blocks[b.Engine] = modelBlock{local: b.Local, parent: parent, hasParent: has}
		parent, has = b.Engine, true
	}
	return nil
}

// matches compares the model with the engine's cache.
func (m *kvModel) matches(e *Engine) error {
	if len(m.blocks) != len(e.cache.byHash) {
		return fmt.Errorf("model has %d blocks, cache %d", len(m.blocks), len(e.cache.byHash))
	}
	for _, b := range e.cache.byHash {
		got, ok := m.blocks[EngineHash(b.seq)]
		want := modelBlock{local: b.local, parent: EngineHash(b.parent), hasParent: b.pos > 0}
		if !want.hasParent {
			want.parent = 0
		}
		if !ok || got != want {
			return fmt.Errorf("block at pos %d: model %+v (present %v), cache %+v", b.pos, got, ok, want)
		}
	}
	return nil
}

// checkInvariants verifies the cache accounting against the requests.
func checkInvariants(e *Engine) error {
	c := e.cache
	refs := make(map[*block]int32)
	anon := 0
	for _, s := range e.running {
		if err := checkSeq(e, s); err != nil {
			return err
		}
		for _, b := range s.refs {
			refs[b]++
		}
		anon += s.anon()
	}
	referenced := 0
	for seq, b := range c.byHash {
		if b.seq != seq || b.refs != refs[b] {
			return fmt.Errorf("block %x: refs %d, held by %d requests", seq, b.refs, refs[b])
		}
		if b.refs > 0 {
			referenced++
		}
		if _, ok := c.byHash[b.parent]; b.pos > 0 && !ok {
			return fmt.Errorf("block %x at pos %d has no cached parent", seq, b.pos)
		}
	}
	if len(refs) != referenced {
		return fmt.Errorf("%d referenced blocks are not cached", len(refs)-referenced)
	}
	if err := checkLRU(c); err != nil {
		return err
	}
	if sum := c.free + c.lru.n + referenced + anon; sum != c.total || c.free < 0 {
		return fmt.Errorf("free %d + lru %d + referenced %d + anon %d != %d", c.free, c.lru.n, referenced, anon, c.total)
	}
	if len(e.running) > e.cfg.MaxNumSeqs {
		return fmt.Errorf("%d running > MaxNumSeqs %d", len(e.running), e.cfg.MaxNumSeqs)
	}
	return checkBatch(e)
}

// checkBatch verifies the iteration in flight against the token budget.
func checkBatch(e *Engine) error {
	if !e.busy {
		return nil
	}
	tokens := 0
	for _, w := range e.cur.work {
		tokens += w.n
		if w.n < 1 || w.s.computed+w.n > w.s.numTokens {
			return fmt.Errorf("%s: scheduled %d tokens at %d of %d", w.s.id, w.n, w.s.computed, w.s.numTokens)
		}
	}
	if tokens > e.cfg.MaxNumBatchedTokens {
		return fmt.Errorf("iteration of %d tokens > budget %d", tokens, e.cfg.MaxNumBatchedTokens)
	}
	return nil
}

func checkSeq(e *Engine, s *seq) error {
	bs := e.cfg.BlockSize
	if want := min(s.computed/bs, len(s.seqs)); len(s.refs) != want {
		return fmt.Errorf("%s: %d cached refs, want %d", s.id, len(s.refs), want)
	}
	for i, b := range s.refs {
		if b.seq != s.seqs[i] {
			return fmt.Errorf("%s: ref %d is not its prompt block", s.id, i)
		}
	}
	if s.held < int(blocksFor(int64(s.computed), bs)) {
		return fmt.Errorf("%s: holds %d blocks for %d tokens", s.id, s.held, s.computed)
	}
	return nil
}

func checkLRU(c *cache) error {
	n := 0
	for b := c.lru.head; b != nil; b = b.next {
		if b.refs != 0 || c.byHash[b.seq] != b {
			return fmt.Errorf("lru holds block %x with refs %d", b.seq, b.refs)
		}
		n++
	}
	idle := 0
	for _, b := range c.byHash {
		if b.refs == 0 {
			idle++
		}
	}
	if n != c.lru.n || n != idle {
		return fmt.Errorf("lru walk %d, count %d, idle blocks %d", n, c.lru.n, idle)
	}
	return nil
}
