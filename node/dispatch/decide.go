package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/load"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// decide projects the load, chooses a worker (by session binding or by the
// policy pipeline) and books the request on it.
func (d *Dispatcher) decide(ctx context.Context, sc *scratch, r *Request) (*Decision, error) {
	s, err := d.lookupSession(ctx, r, sc.plan.now)
	if err != nil {
		return nil, err
	}
	if err := d.project(sc); err != nil {
		return nil, fmt.Errorf("%w: projecting load: %w", ErrBadRequest, err)
	}
	i, bound := -1, false
	if s.found && r.Pin == nil {
		i, bound = d.affine(ctx, sc, &s)
	}
	if i < 0 {
		if i, err = d.selectWorker(sc, r); err != nil {
			return nil, err
		}
		if i, bound, err = d.bindFirst(ctx, sc, &s, i); err != nil {
			return nil, err
		}
	}
	return d.book(ctx, sc, r, i, bound, &s)
}

// selectWorker runs the policy pipeline and returns the chosen candidate's
// index in sc.cands.
func (d *Dispatcher) selectWorker(sc *scratch, r *Request) (int, error) {
	p := &sc.plan
	sc.preq = policy.Request{ISLTokens: p.isl, BlockSize: p.blockSize}
	if r.Pin != nil {
		sc.pin = policy.Pin{Worker: r.Pin.Engine, Rank: r.Pin.Rank, AnyRank: r.Pin.AnyRank}
		sc.preq.Pin = &sc.pin
	}
	if err := d.pipe.Route(&sc.dec, &sc.preq, sc.cands); err != nil {
		return -1, mapPolicyError(err)
	}
	if i := findCandidate(sc.cands, sc.dec.Worker); i >= 0 {
		return i, nil
	}
	return -1, fmt.Errorf("%w: selector chose unknown worker %v", ErrNoEngine, sc.dec.Worker)
}

// findCandidate returns the index of w in the sorted candidates, or -1.
func findCandidate(cands []policy.Candidate, w routing.Worker) int {
	i, ok := slices.BinarySearchFunc(cands, w, func(c policy.Candidate, w routing.Worker) int { return c.Info.Worker.Compare(w) })
	if !ok {
		return -1
	}
	return i
}

// errEngineGone reports that the chosen engine left the registry after the
// candidates were read; Route tries once more.
var errEngineGone = errors.New("engine left the fleet during routing")

// book reserves the request's load on candidate i, records the decision in
// the approximate or side index and returns the Decision whose callbacks
// finish the request.
func (d *Dispatcher) book(ctx context.Context, sc *scratch, r *Request, i int, bound bool, s *session) (*Decision, error) {
	p, c := &sc.plan, &sc.cands[i]
	w := c.Info.Worker
	url, ok := d.engines.Endpoint(w.ID)
	if !ok {
		return nil, fmt.Errorf("%w: %w: engine %d", ErrNoEngine, errEngineGone, w.ID)
	}
	lr := load.Request{ID: r.ID, Worker: w, Hashes: sc.trackerHashes(), ISLTokens: p.isl, CachedBlocks: int(c.Overlap.Device)}
	if err := p.tracker.Add(lr, p.now); err != nil {
		return nil, fmt.Errorf("%w: booking: %w", ErrBadRequest, err)
	}
	d.record(sc, w)
	d.gauges(w).set(p.tracker, w)
	d.holdSession(ctx, s, w, bound, p)
	f := &inflight{d: d, ctx: context.WithoutCancel(ctx), id: r.ID, t: p.tracker, w: w, s: *s}
	dec := NewDecision(w, url, f.onFirstToken, f.done).WithLost(d.lives.of(w.ID))
	dec.Blocks, dec.CachedBlocks, dec.SessionBound = p.blocks, int(c.Overlap.Device), bound
	return dec, nil
}

// record teaches the dispatcher's own indexes the decision: the
// approximate index for text and approximate mode, else the side index
// when predicting. A failure only costs future overlap, so it is logged.
func (d *Dispatcher) record(sc *scratch, w routing.Worker) {
	var err error
	switch {
	case sc.plan.text || d.cfg.ApproximateMode:
		_, err = d.approx.Record(w, sc.hashes, sc.plan.now)
	case d.side != nil:
		_, err = d.side.Record(w, sc.hashes, sc.plan.now)
	}
	if err != nil {
		d.log.Warn("recording a routing decision", "worker", w.String(), "err", err)
	}
}

// inflight is one dispatched request's state, behind its Decision's
// callbacks. The frontend calls them from the request's goroutine, so it
// needs no lock.
type inflight struct {
	d   *Dispatcher
	ctx context.Context
	id  string
	t   *load.Tracker
	w   routing.Worker
	s   session
}

// onFirstToken ends the request's prefill load and, as the first proof of
// a successful dispatch, binds a new session.
func (f *inflight) onFirstToken() {
	_ = f.t.PrefillComplete(f.id) // unknown when expired or removed: nothing to end
	f.d.publishLoad(f.t, f.w)
	f.d.commitBinding(f.ctx, &f.s, f.w)
}

// done frees the request's load, binds a new session on success (when no
// first token was reported), releases the session's hold and ends a final
// session. An unreachable engine becomes a suspect first.
func (f *inflight) done(err error) {
	if errors.Is(err, ErrEngineUnreachable) {
		f.d.suspect(f.w.ID)
	}
	f.t.Free(f.id)
	f.d.publishLoad(f.t, f.w)
	if err == nil {
		f.d.commitBinding(f.ctx, &f.s, f.w)
	}
	f.d.releaseSession(f.ctx, &f.s)
}

// storeError classifies a session store failure: its own sentinels pass,
// anything else is ErrStore.
func storeError(err error) error {
	if errors.Is(err, ErrBadRequest) || errors.Is(err, ErrSessionLimit) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrStore, err)
}
