package mocker

import "time"

// schedule builds and starts the iteration beginning at t, following vLLM's
// v1 scheduler: running requests first, in admission order, each taking its
// next prefill chunk or one decode token out of the token budget, preempting
// the most recently admitted running request when KV blocks run out; then,
// if nothing was preempted, waiting requests in FCFS order while the budget,
// max_num_seqs and the KV cache allow. It reports false when nothing could
// be scheduled.
func (e *Engine) schedule(t time.Time) bool {
	e.landTransfers(t)
	e.cur = iteration{start: t, work: e.cur.work[:0]}
	budget := e.cfg.MaxNumBatchedTokens
	preempted := false
	for i := 0; i < len(e.running) && budget > 0; i++ {
		s := e.running[i]
		n := min(s.numTokens-s.computed, budget)
		if !e.reserve(s, n, t, &preempted) {
			break
		}
		e.addWork(s, n)
		budget -= n
	}
	if !preempted {
		e.admit(t, &budget)
	}
	if len(e.cur.work) == 0 {
		return false
	}
	var b Batch
	for _, w := range e.cur.work {
		b.add(w.s.computed, w.n, w.decode)
	}
	e.cur.end = t.Add(scaled(e.cfg.Timing.IterationTime(b), e.cfg.SpeedUp))
	e.busy = true
	return true
}

// addWork schedules n tokens of s. One token that completes the sequence of
// a request that has already generated is a decode; anything else computes
// prompt (or recomputed) tokens and is a prefill chunk.
func (e *Engine) addWork(s *seq, n int) {
	decode := n == 1 && s.generated > 0 && s.computed == s.numTokens-1
	e.cur.work = append(e.cur.work, work{s: s, n: n, decode: decode})
}

// reserve gives running request s the blocks for n more tokens, preempting
// running requests from the back of the running list until they fit. It
// reports false when s itself had to be preempted.
func (e *Engine) reserve(s *seq, n int, t time.Time, preempted *bool) bool {
	need := int(blocksFor(int64(s.computed+n), e.cfg.BlockSize)) - s.held
	for need > e.cache.available() {
		victim := e.running[len(e.running)-1]
		e.preempt(victim, t)
		*preempted = true
		if victim == s {
			return false
		}
	}
	e.cache.allocate(need)
	s.held += max(need, 0)
	return true
}

// preempt releases every block of the last running request s and puts it at
// the front of the waiting queue; its cached prompt blocks stay in the cache
// unreferenced, so readmission usually finds them again (vLLM's recompute
// preemption with prefix caching).
func (e *Engine) preempt(s *seq, t time.Time) {
	e.running = e.running[:len(e.running)-1]
	e.cache.release(s.refs, s.anon())
	s.refs, s.held, s.computed = s.refs[:0], 0, 0
	s.preemptions++
	e.waiting.pushFront(s)
	e.out.Preempted = append(e.out.Preempted, Preemption{ID: s.id, At: t})
}

// admit moves waiting requests that have arrived by t into the running set
// in FCFS order. Each looks up its longest cached prefix, which it skips,
// and takes its first prefill chunk; the queue stops at the first request
// that does not fit, so a long request is never overtaken.
func (e *Engine) admit(t time.Time, budget *int) {
	bs := e.cfg.BlockSize
	for *budget > 0 && len(e.running) < e.cfg.MaxNumSeqs {
		s := e.waiting.front()
		if s == nil || s.arrival.After(t) {
			return
		}
		// At least one token is always computed, so that the request has
		// logits to sample from even when its whole prompt is cached.
		hits, idle := e.cache.prefix(s.seqs, (s.numTokens-1)/bs)
		have := hits * bs // cached, or received from a prefill engine
		if s.remote {
			have = max(have, e.transferred(s))
		}
		n := min(s.numTokens-have, *budget)
		need := int(blocksFor(int64(have+n), bs)) - hits
		if need > e.cache.available()-idle {
			return
		}
		e.waiting.popFront()
		s.refs = e.cache.acquire(s.refs[:0], s.seqs[:hits])
		e.cache.allocate(need)
		s.held, s.computed, s.remote = hits+need, have, false
		// Received blocks are in memory on arrival: they enter the cache,
		// published, as blocks computed by an iteration would.
		e.storeBlocks(s)
		e.running = append(e.running, s)
		e.addWork(s, n)
		*budget -= n
		e.recordAdmission(s, hits, have/bs-hits, t)
	}
}

func (e *Engine) recordAdmission(s *seq, hits, received int, t time.Time) {
	readmit := s.admitted
	if !s.admitted {
		s.admitted, s.admittedAt, s.hitBlocks, s.receivedBlocks = true, t, hits, received
	}
	e.out.Admitted = append(e.out.Admitted, Admission{
		ID: s.id, At: t, HitBlocks: hits, ReceivedBlocks: received, PromptBlocks: len(s.seqs), Readmission: readmit,
	})
}
