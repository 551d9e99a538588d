package dispatch

import (
	"context"
	"fmt"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// SelectedPrefill is the prefill half of a disaggregated Selection: the
// engine the caller sends the prefill hop to, handing its cache off to
// the Selection's (decode) engine, as PrefillHop is a Decision's.
type SelectedPrefill struct {
	Worker      routing.Worker
	EndpointURL string
	// BootstrapPort, DPSize and CachedBlocks are PrefillHop's.
	BootstrapPort uint32
	DPSize        uint32
	CachedBlocks  int
}

// selectByRole is Select for a model whose ranks have roles, as
// routeByRole is Route for it: whole on the ranks Layout.Serving names,
// or a pair whose prefill engine is Selection.Prefill.
func (d *Dispatcher) selectByRole(ctx context.Context, sc *policy.Scratch, r *Request, q *policy.Query, ph *phases) (*Selection, error) {
	ranks, known := d.engines.Workers(r.Model)
	if !known {
		return nil, fmt.Errorf("%w: %q", ErrModelNotFound, r.Model)
	}
	rs := d.roles.Get().(*roleScratch)
	defer d.roles.Put(rs)
	rs.layout.Split(ranks)
	serving, whole, err := rs.layout.Serving(d.cfg.DecodeFallback, rs.whole[:0])
	rs.whole = whole
	if err != nil {
		return nil, mapPolicyError(err)
	}
	if serving == policy.ServeDisaggregated {
		q.Ranks = ranks
		return d.selectPair(ctx, rs, r, q, ph)
	}
	if err := d.prepareOn(sc, r, q, ph, whole, false); err != nil {
		return nil, err
	}
	return d.selectPrepared(ctx, sc, q)
}

// selectPair is decidePair without booking: the pair is settled, and the
// Selection describes the decode engine, with the prefill stage's
// candidates and the prefill engine beside.
func (d *Dispatcher) selectPair(ctx context.Context, rs *roleScratch, r *Request, q *policy.Query, ph *phases) (*Selection, error) {
	ds := &rs.pair
	p, purl, durl, err := d.choosePair(ctx, ds, r, q, ph, false)
	if err != nil {
		return nil, err
	}
	d.obs.decisions.decided(q.Model, ds.Prefill.Candidates(), p.Prefill.CachedBlocks)
	sel := newSelection(&ds.Prefill, &p.Prefill, durl)
	sel.Worker, sel.SessionBound = p.Decode.Worker, p.Decode.Bound
	sel.Prefill = &SelectedPrefill{Worker: p.Prefill.Worker, EndpointURL: purl, CachedBlocks: p.Prefill.CachedBlocks,
		DPSize: ranksOf(rs.layout.Prefill, p.Prefill.Worker.ID), BootstrapPort: d.bootstrapPort(p.Prefill.Worker.ID)}
	d.pair.Settle(ctx, ds, &p)
	return sel, nil
}
