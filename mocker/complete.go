package mocker

import (
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// complete finishes the iteration in flight at its end time: computed tokens
// advance, newly completed prompt blocks enter the prefix cache (Stored
// events), requests whose sequence is fully computed sample a token, and
// requests that reached MaxTokens release their blocks.
func (e *Engine) complete() {
	t := e.cur.end
	finished := false
	for _, w := range e.cur.work {
		s := w.s
		s.computed += w.n
		e.storeBlocks(s)
		if s.computed < s.numTokens || s.canceled {
			continue
		}
		e.sample(s, t)
		if s.generated == s.maxTokens {
			e.finish(s, t)
			finished = true
		}
	}
	if finished {
		e.dropFinished()
	}
	e.busy, e.lastEnd = false, t
	e.dropCanceled()
	e.out.Iterations++
}

// sample records one generated token of s at t.
func (e *Engine) sample(s *seq, t time.Time) {
	s.generated++
	s.numTokens++
	e.out.TokensGenerated++
	if s.generated == 1 {
		s.firstToken = t
		e.out.FirstTokens = append(e.out.FirstTokens, FirstToken{ID: s.id, At: t})
	} else if gap := t.Sub(s.lastToken); gap > s.maxITL {
		s.maxITL = gap
	}
	s.lastToken = t
}

// finish releases s's blocks and reports its completion. The request stays
// in the running slice, marked by held < 0, until dropFinished compacts it.
func (e *Engine) finish(s *seq, t time.Time) {
	e.cache.release(s.refs, s.anon())
	s.refs, s.held = nil, -1
	delete(e.active, s.id)
	e.out.Finished = append(e.out.Finished, s.completion(t))
}

// dropFinished removes finished requests from the running list, keeping
// admission order.
func (e *Engine) dropFinished() {
	kept := e.running[:0]
	for _, s := range e.running {
		if s.held >= 0 {
			kept = append(kept, s)
		}
	}
	clear(e.running[len(kept):])
	e.running = kept
}

// storeBlocks caches the complete prompt blocks of s that are computed but
// not yet cached, publishing each contiguous run of newly stored blocks as
// one Stored event whose parent is the block before the run.
func (e *Engine) storeBlocks(s *seq) {
	full := min(s.computed/e.cfg.BlockSize, len(s.seqs))
	var run []routing.StoredBlock
	runStart := 0
	for i := len(s.refs); i < full; i++ {
		var parent routing.SeqHash
		if i > 0 {
			parent = s.seqs[i-1]
		}
		b, stored := e.cache.commit(s.seqs[i], parent, s.locals[i], i)
		s.refs = append(s.refs, b)
		if !stored {
			e.emitStored(s, runStart, run)
			run = nil
			continue
		}
		if run == nil {
			runStart = i
		}
		run = append(run, routing.StoredBlock{Engine: EngineHash(b.seq), Local: b.local})
	}
	e.emitStored(s, runStart, run)
}

// emitStored publishes a run of stored blocks starting at block index start.
func (e *Engine) emitStored(s *seq, start int, run []routing.StoredBlock) {
	if len(run) == 0 {
		return
	}
	ev := routing.Event{Kind: routing.EventStored, Blocks: run}
	if start > 0 {
		ev.Parent, ev.HasParent = EngineHash(s.seqs[start-1]), true
	}
	e.log.emit(ev)
}
