package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// Bootstrapper is optionally implemented by an Engines: a prefill
// engine's SGLang KV bootstrap port (0 when it has none). Without it
// every prefill engine is handed off vLLM's way.
type Bootstrapper interface {
	BootstrapPort(id routing.WorkerID) (uint32, bool)
}

// errByRole reports, from the admission queue's preparation, a model
// whose ranks have roles: Route serves it by its roles instead (the queue
// holds aggregated requests only).
var errByRole = errors.New("dispatch: the model is served by role")

// roleScratch is one by-role decision's memory, pooled.
type roleScratch struct {
	layout policy.Layout
	whole  []routing.WorkerInfo
	pair   policy.DisaggScratch
}

// routeByRole serves a request of a model whose ranks have roles, as
// policy.Layout.Serving says: whole on the ranks it names, with the
// aggregated decision path, or in two hops, prefill then decode. A model
// whose prefill ranks are all unreachable falls back to the whole path
// too, unless the request's prefill already failed once.
func (d *Dispatcher) routeByRole(ctx context.Context, sc *policy.Scratch, r *Request, q *policy.Query, ph *phases, ranks []routing.WorkerInfo) (*Decision, error) {
	rs := d.roles.Get().(*roleScratch)
	defer d.roles.Put(rs)
	rs.layout.Split(ranks)
	fallback := d.cfg.DecodeFallback && !r.PrefillFailed
	serving, whole, err := rs.layout.Serving(fallback, rs.whole[:0])
	rs.whole = whole
	if err != nil {
		return nil, mapPolicyError(err)
	}
	if serving == policy.ServeAggregated {
		return d.attemptOn(ctx, sc, r, q, ph, whole)
	}
	q.Ranks = ranks
	dec, err := d.decidePair(ctx, rs, r, q, ph)
	if fallback && errors.Is(err, policy.ErrNoPrefillWorker) {
		rs.whole = append(append(rs.whole[:0], rs.layout.Decode...), rs.layout.Aggregated...)
		return d.attemptOn(ctx, sc, r, q, ph, rs.whole)
	}
	return dec, err
}

// decidePair is the two-hop decision: the pair, booked, as one Decision
// whose Prefill is the prefill hop.
func (d *Dispatcher) decidePair(ctx context.Context, rs *roleScratch, r *Request, q *policy.Query, ph *phases) (*Decision, error) {
	ds := &rs.pair
	p, purl, durl, err := d.choosePair(ctx, ds, r, q, ph, true)
	if err != nil {
		return nil, err
	}
	b, err := d.pair.Book(ctx, ds, &p)
	if err != nil {
		return nil, mapPolicyError(err)
	}
	d.obs.decisions.decided(q.Model, ds.Prefill.Candidates(), p.Prefill.CachedBlocks)
	dec := d.newDecision(ctx, q.Model, b.Decode, durl)
	dec.Blocks, dec.CachedBlocks, dec.SessionBound = ds.Prefill.Blocks(), p.Prefill.CachedBlocks, p.Decode.Bound
	dec.Prefill = d.newPrefillHop(ctx, q.Model, b.Prefill, purl)
	dec.Prefill.CachedBlocks, dec.Prefill.DPSize = p.Prefill.CachedBlocks, ranksOf(rs.layout.Prefill, p.Prefill.Worker.ID)
	return dec, nil
}

// choosePair is the two-hop choice of Route and Select: candidates,
// hashing and matching on the prefill stage, then the pair and its
// engines' URLs; track is d.hashes'.
func (d *Dispatcher) choosePair(ctx context.Context, ds *policy.DisaggScratch, r *Request, q *policy.Query, ph *phases, track bool) (p policy.Pair, prefillURL, decodeURL string, err error) {
	if err = d.pair.Candidates(ctx, ds, q, ph.start); err != nil {
		return p, "", "", mapPolicyError(err)
	}
	if err = d.hashes(&ds.Prefill, r, track); err != nil {
		return p, "", "", err
	}
	ph.hashed = d.cfg.Now()
	d.pair.Match(ds)
	ph.matched = d.cfg.Now()
	if p, err = d.pair.Choose(ctx, ds, q); err != nil {
		return p, "", "", mapPolicyError(err)
	}
	prefillURL, pok := d.engines.Endpoint(p.Prefill.Worker.ID)
	decodeURL, dok := d.engines.Endpoint(p.Decode.Worker.ID)
	if !pok || !dok {
		return p, "", "", fmt.Errorf("%w: %w: engine %d or %d", ErrNoEngine, errEngineGone, p.Prefill.Worker.ID, p.Decode.Worker.ID)
	}
	return p, prefillURL, decodeURL, nil
}

// ranksOf counts the ranks of engine id: its data-parallel size, since
// the registry lists every rank of a live engine.
func ranksOf(ranks []routing.WorkerInfo, id routing.WorkerID) uint32 {
	var n uint32
	for i := range ranks {
		if ranks[i].Worker.ID == id {
			n++
		}
	}
	return n
}

// newDecision wraps a booking in the Decision the frontend drives.
func (d *Dispatcher) newDecision(ctx context.Context, model string, b policy.Booking, url string) *Decision {
	f := &inflight{d: d, ctx: context.WithoutCancel(ctx), b: b, model: model}
	w := b.Worker()
	d.gauges(w, model).set(&f.b)
	return NewDecision(w, url, f.onFirstToken, f.done).WithLost(d.lives.of(w.ID)).WithOutputTokens(f.onOutput)
}

// newPrefillHop wraps the prefill hop's booking. Its end is a request's
// end for the booking (Done), so the same inflight serves.
func (d *Dispatcher) newPrefillHop(ctx context.Context, model string, b policy.Booking, url string) *PrefillHop {
	f := &inflight{d: d, ctx: context.WithoutCancel(ctx), b: b, model: model}
	w := b.Worker()
	d.gauges(w, model).set(&f.b)
	h := NewPrefillHop(w, url, d.bootstrapPort(w.ID), f.done)
	h.lost = d.lives.of(w.ID)
	return h
}

// bootstrapPort is prefill engine id's SGLang KV bootstrap port, 0 for
// none.
func (d *Dispatcher) bootstrapPort(id routing.WorkerID) uint32 {
	var port uint32
	if bs, ok := d.engines.(Bootstrapper); ok {
		port, _ = bs.BootstrapPort(id)
	}
	return port
}
