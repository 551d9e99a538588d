package peers

import (
	"fmt"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// kvrSubject drives routing/index.Exact: stored events as routing.Event
// values through Apply, queries as sequence hashes through FindMatches.
type kvrSubject struct {
	st      *Stream
	seed    uint64
	x       *index.Exact
	events  []routing.Event
	queries [][]routing.SeqHash
	// Scratch of IngestTokens, HashQuery and Query.
	locals  []routing.LocalHash
	blocks  []routing.StoredBlock
	hashes  []routing.SeqHash
	matches []routing.Match
	answers []Answer
}

var _ Subject = (*kvrSubject)(nil)

// workerOf maps a stream worker index to kvrouter's worker (ids start at 1).
func workerOf(w int) routing.Worker { return routing.Worker{ID: routing.WorkerID(w + 1)} }

func (k *kvrSubject) Prepare(st *Stream) error {
	k.st, k.seed = st, routing.Seed("", "")
	bs := st.Shape.BlockTokens
	k.events = make([]routing.Event, st.Shape.Events())
	slab := make([]routing.StoredBlock, 0, st.Shape.Blocks())
	for e := range k.events {
		locals, err := routing.LocalHashes(k.locals[:0], st.Tokens(e), bs, k.seed)
		if err != nil {
			return fmt.Errorf("kvrouter keys: %w", err)
		}
		k.locals = locals
		start := len(slab)
		for i, id := range st.EngineIDs(e) {
			slab = append(slab, routing.StoredBlock{Engine: routing.EngineHash(id), Local: locals[i]})
		}
		k.events[e] = k.event(e, slab[start:len(slab):len(slab)])
	}
	k.queries = make([][]routing.SeqHash, len(st.Queries()))
	for q, e := range st.Queries() {
		hs, err := routing.BlockHashes(nil, st.Tokens(e), bs, k.seed)
		if err != nil {
			return fmt.Errorf("kvrouter query keys: %w", err)
		}
		k.queries[q] = hs
	}
	return nil
}

// event builds stored event e; ids count from 1 per worker, in order.
func (k *kvrSubject) event(e int, blocks []routing.StoredBlock) routing.Event {
	return routing.Event{
		Worker: workerOf(k.st.Worker(e)),
		ID:     uint64(e%k.st.Shape.Seqs) + 1,
		Kind:   routing.EventStored,
		Tier:   routing.TierDevice,
		Blocks: blocks,
	}
}

func (k *kvrSubject) Open() error {
	k.x = index.NewExact()
	return nil
}

func (k *kvrSubject) Ingest(e int) error { return k.x.Apply(&k.events[e]) }

func (k *kvrSubject) IngestTokens(e int) error {
	locals, err := routing.LocalHashes(k.locals[:0], k.st.Tokens(e), k.st.Shape.BlockTokens, k.seed)
	if err != nil {
		return err
	}
	k.locals = locals
	k.blocks = k.blocks[:0]
	for i, id := range k.st.EngineIDs(e) {
		k.blocks = append(k.blocks, routing.StoredBlock{Engine: routing.EngineHash(id), Local: locals[i]})
	}
	ev := k.event(e, k.blocks)
	return k.x.Apply(&ev)
}

func (k *kvrSubject) HashQuery(q int) error {
	hs, err := routing.BlockHashes(k.hashes[:0], k.st.Tokens(k.st.Queries()[q]), k.st.Shape.BlockTokens, k.seed)
	k.hashes = hs
	return err
}

func (k *kvrSubject) Query(q int) error {
	k.matches = k.x.FindMatches(k.queries[q], k.matches[:0])
	return nil
}

func (k *kvrSubject) Answers() []Answer {
	k.answers = k.answers[:0]
	for _, m := range k.matches {
		k.answers = append(k.answers, Answer{Worker: int(m.Worker.ID) - 1, Depth: int(m.Total())})
	}
	return k.answers
}
