package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvrouter/kvrouter/routing/policy"
)

// errEngineGone reports that the chosen engine left the registry after the
// candidates were read; Route tries once more.
var errEngineGone = errors.New("engine left the fleet during routing")

// decide chooses a worker (by session binding or by the policy pipeline),
// books the request on it and returns the Decision whose callbacks finish
// the request.
func (d *Dispatcher) decide(ctx context.Context, sc *policy.Scratch, q *policy.Query) (*Decision, error) {
	ch, err := d.core.Choose(ctx, sc, q)
	if err != nil {
		return nil, mapPolicyError(err)
	}
	url, ok := d.engines.Endpoint(ch.Worker.ID)
	if !ok {
		return nil, fmt.Errorf("%w: %w: engine %d", ErrNoEngine, errEngineGone, ch.Worker.ID)
	}
	b, err := d.core.Book(ctx, sc, q, &ch)
	if err != nil {
		return nil, mapPolicyError(err)
	}
	d.obs.decisions.decided(q.Model, sc.Candidates(), ch.CachedBlocks)
	dec := d.newDecision(ctx, q.Model, b, url)
	dec.Blocks, dec.CachedBlocks, dec.SessionBound = sc.Blocks(), ch.CachedBlocks, ch.Bound
	return dec, nil
}

// inflight is one dispatched request's state, behind its Decision's
// callbacks. The frontend calls them from the request's goroutine, so it
// needs no lock.
type inflight struct {
	d     *Dispatcher
	ctx   context.Context
	b     policy.Booking
	model string
}

// onFirstToken ends the request's prefill load and binds a new session.
func (f *inflight) onFirstToken() {
	f.b.FirstToken(f.ctx)
	f.d.publishLoad(&f.b)
	f.d.pumpModel(f.model)
}

// onOutput counts generated tokens, and republishes the engine's load
// gauges when the booking's load changed (at a block boundary).
func (f *inflight) onOutput(n int) {
	if f.b.OutputTokens(n) {
		f.d.publishLoad(&f.b)
	}
}

// done ends the booking: an unreachable engine becomes a suspect, the load
// is freed, and the session is bound (on success) and released.
func (f *inflight) done(err error) {
	o := policy.Succeeded
	switch {
	case errors.Is(err, ErrEngineUnreachable):
		o = policy.Unreachable
	case err != nil:
		o = policy.Failed
	}
	f.b.Done(f.ctx, o)
	f.d.publishLoad(&f.b)
	f.d.pumpModel(f.model)
}
