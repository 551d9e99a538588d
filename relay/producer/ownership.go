package producer

import (
	"errors"

	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/routing"
)

// applyChange applies one validated change to the exact ownership and the
// summary. Every rank holds a block at most once, so the reference count of
// a block is the number of ranks holding it and a rank or worker removal
// drops each of its blocks exactly once.
func (p *Producer) applyChange(c Change) {
	switch c.Kind {
	case Stored:
		for _, h := range c.Hashes {
			p.store(c.Worker, h)
		}
	case Removed:
		for _, h := range c.Hashes {
			p.drop(c.Worker, h)
		}
	case RankCleared:
		p.clearRank(c.Worker)
	case WorkerRemoved:
		for w := range p.owners {
			if w.ID == c.Worker.ID {
				p.clearRank(w)
			}
		}
	}
}

// store records that w holds h, taking a reference on the first hold.
func (p *Producer) store(w routing.Worker, h routing.SeqHash) {
	held := p.owners[w]
	if held == nil {
		held = make(map[routing.SeqHash]struct{})
		p.owners[w] = held
	}
	if _, ok := held[h]; ok {
		return
	}
	held[h] = struct{}{}
	p.stats.Contributions++
	// A failed insert is recorded by the RefSet as omitted; Apply grows
	// the filter before it publishes, so the omission never ships.
	if err := p.refs.Add(h); err != nil && !errors.Is(err, filter.ErrFull) {
		p.stats.Inconsistencies++
	}
}

// drop records that w no longer holds h, releasing its reference.
func (p *Producer) drop(w routing.Worker, h routing.SeqHash) {
	held := p.owners[w]
	if _, ok := held[h]; !ok {
		p.stats.UnknownRemovals++
		return
	}
	delete(held, h)
	if len(held) == 0 {
		delete(p.owners, w)
	}
	p.release(h)
}

// clearRank drops every block w holds.
func (p *Producer) clearRank(w routing.Worker) {
	for h := range p.owners[w] {
		p.release(h)
	}
	delete(p.owners, w)
}

// release drops one reference of a block some rank held.
func (p *Producer) release(h routing.SeqHash) {
	p.stats.Contributions--
	if err := p.refs.Remove(h); err != nil {
		// The ranks' sets and the RefSet are kept in lockstep, so this is
		// an invariant violation; it is counted, never propagated as a
		// filter delete of an unheld block.
		p.stats.Inconsistencies++
	}
}

// Holds reports whether rank w holds h, for tests and diagnostics.
func (p *Producer) Holds(w routing.Worker, h routing.SeqHash) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.owners[w][h]
	return ok
}

// Refs returns the number of ranks holding h.
func (p *Producer) Refs(h routing.SeqHash) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refs.Refs(h)
}
