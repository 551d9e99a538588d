package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/routing"
)

// rank is one data-parallel rank: a simulated engine, the requests in
// flight on it, and the driver goroutine that advances it in real time.
//
// mu serialises every use of the engine (Submit from handlers, Advance from
// the driver, Load from the heartbeat, Dump from the snapshot responder)
// and also covers publishing the rank's event batches and snapshot replies,
// so that the NATS connection sees them in event-id order.
type rank struct {
	srv    *Server
	worker routing.Worker

	mu   sync.Mutex
	eng  *mocker.Engine
	reqs map[string]*pending
	open bool

	wake     chan struct{}
	drop     atomic.Int64
	inflight atomic.Int64
	// canceled counts requests aborted because their client went away.
	canceled atomic.Int64

	// vpub, venc and book are the vLLM-wire publisher, its encoder and the
	// tokens of the blocks of requests in flight (ProtocolVLLM only).
	vpub *vllmPub
	venc *vllmEncoder
	book *tokenBook
}

func newRank(s *Server, idx uint32) (*rank, error) {
	w := routing.Worker{ID: routing.WorkerID(s.cfg.EngineID), Rank: idx}
	eng, err := mocker.New(s.cfg.Engine, w)
	if err != nil {
		return nil, fmt.Errorf("%w: engine: %w", ErrConfig, err)
	}
	r := &rank{srv: s, worker: w, eng: eng, reqs: make(map[string]*pending), wake: make(chan struct{}, 1)}
	if s.vllm() {
		if r.vpub, err = newVLLMPub(&s.cfg, idx, s.log.With("rank", idx)); err != nil {
			return nil, err
		}
		r.venc = newVLLMEncoder(s.incarnation, s.cfg.Engine.BlockSize, idx)
		r.book = &tokenBook{blockSize: s.cfg.Engine.BlockSize, m: make(map[routing.LocalHash]*blockTokens)}
	}
	return r, nil
}

// submit queues a request on the engine at the current time and wakes the
// driver. It refuses with ErrStopped while the rank is not running.
func (r *rank) submit(p *pending, req mocker.Request) error {
	r.mu.Lock()
	if !r.open {
		r.mu.Unlock()
		return ErrStopped
	}
	err := r.eng.Submit(req, r.srv.cfg.Clock())
	if err == nil {
		r.reqs[p.id] = p
		r.inflight.Add(1)
		if r.book != nil {
			p.blocks = r.book.add(req.Tokens, req.HashSeed, p.lora, p.salt)
		}
	}
	r.mu.Unlock()
	if err == nil {
		r.wakeUp()
	}
	return err
}

// wakeUp makes the driver look at the engine again; a wake already
// pending suffices.
func (r *rank) wakeUp() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// forget drops p from the requests in flight. The caller holds r.mu.
func (r *rank) forget(p *pending) {
	delete(r.reqs, p.id)
	r.inflight.Add(-1)
	if r.book != nil {
		r.book.release(p.blocks)
	}
}

// cancel aborts p in the engine unless it has finished, and wakes the
// driver, whose next event time may have changed.
func (r *rank) cancel(p *pending) {
	r.mu.Lock()
	_, live := r.reqs[p.id]
	if live {
		r.eng.Cancel(p.id)
		r.forget(p)
	}
	r.mu.Unlock()
	if live {
		r.canceled.Add(1)
		r.wakeUp()
	}
}

// setOpen opens or closes the rank to new requests. Closing aborts every
// request in flight, because no driver will advance them any more.
func (r *rank) setOpen(open bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open = open
	if open {
		return
	}
	for _, p := range r.reqs {
		p.abort(ErrStopped)
		r.forget(p)
	}
}

// run drives the engine until ctx is done: it sleeps until the engine's
// next event time, advances the engine to the current time and dispatches
// what happened. A submit wakes it early, since an idle engine's next event
// time changes when work arrives. Config.Engine.SpeedUp already scales the
// engine's iteration times, so wall-clock times are fed unscaled.
func (r *rank) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait, ok := r.step()
		var fire <-chan time.Time
		if ok {
			timer.Reset(wait)
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-fire:
		}
	}
}

// step advances the engine if its next event is due and reports how long to
// sleep until the following one (false when the engine is idle).
func (r *rank) step() (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.srv.cfg.Clock()
	next, ok := r.eng.NextEventTime()
	if ok && !next.After(now) {
		res := r.eng.Advance(now)
		// Events go out before dispatch ends requests: the vLLM wire takes
		// the tokens of stored blocks from the requests in flight.
		r.srv.publishEvents(r, res.Events)
		r.dispatch(&res)
		next, ok = r.eng.NextEventTime()
	}
	return next.Sub(now), ok
}

// dispatch turns one Advance into request progress and ends finished
// requests. The engine reports first tokens and completions but not each
// request's tokens per iteration, so a decoding request is credited one
// token per completed iteration, exact while each Advance completes one
// iteration and no prefill chunk starves a decode. The count stays below
// MaxTokens until the completion sets it exactly, so the stream always
// carries exactly the generated tokens.
func (r *rank) dispatch(res *mocker.StepResult) {
	if res.Iterations > 0 {
		for _, p := range r.reqs {
			if p.decoding {
				if n := min(p.emitted+res.Iterations, p.maxTokens-1); n > p.emitted {
					p.announce(n)
				}
			}
		}
	}
	for _, c := range timeline(res) {
		if p := r.reqs[c.id]; p != nil {
			c.apply(p)
		}
	}
	for _, c := range res.Finished {
		if p := r.reqs[c.ID]; p != nil {
			p.finish(c)
			r.forget(p)
		}
	}
}

// load samples the engine's load and last event id for a heartbeat.
func (r *rank) load() (mocker.Load, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.eng.Load(), r.eng.LastEventID()
}

// change is one event of an Advance that starts or stops a request's
// per-iteration token credit.
type change struct {
	at       time.Time
	id       string
	decoding bool
	first    bool
}

// timeline orders the first tokens, preemptions and readmissions of one
// Advance by time. A preemption stops the credit: the request is
// recomputed from scratch. A readmission restarts it for a request that
// had produced tokens, because the recompute ends by sampling the next
// token; for a long recompute spanning several iterations this credits
// tokens slightly early, which the MaxTokens-1 cap bounds. A first token
// starts it.
func timeline(res *mocker.StepResult) []change {
	var out []change
	for _, p := range res.Preempted {
		out = append(out, change{at: p.At, id: p.ID})
	}
	for _, a := range res.Admitted {
		if a.Readmission {
			out = append(out, change{at: a.At, id: a.ID, decoding: true})
		}
	}
	for _, f := range res.FirstTokens {
		out = append(out, change{at: f.At, id: f.ID, decoding: true, first: true})
	}
	slices.SortStableFunc(out, func(a, b change) int { return a.at.Compare(b.at) })
	return out
}

// apply records the change on the request's driver-side state.
func (c change) apply(p *pending) {
	switch {
	case c.first:
		p.decoding = true
		p.announce(max(p.emitted, 1))
	case c.decoding:
		p.decoding = p.emitted > 0
	default:
		p.decoding = false
	}
}
