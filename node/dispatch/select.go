package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// Selection is the engine chosen for a request whose caller sends it
// there itself (the node's selection API): the decision of Route, with the
// candidates it compared, and no booking.
type Selection struct {
	Worker routing.Worker
	// EndpointURL is the engine's OpenAI-compatible base URL (no /v1).
	EndpointURL string
	// BlockSize is the block size the prompt was hashed at; Blocks and
	// CachedBlocks are its complete blocks and how many of them the
	// chosen worker holds (predicted).
	BlockSize, Blocks, CachedBlocks int
	// SessionBound reports that a session binding decided the engine.
	SessionBound bool
	// Reason names the rule that chose: the selector's ("argmin",
	// "sampled", "least-loaded", "pinned", ...) or ReasonSession.
	Reason string
	// Candidates are the ranks compared, sorted by worker.
	Candidates []CandidateCost
	// Prefill, when set, makes the selection disaggregated: Worker is the
	// decode engine, Prefill the prefill engine (SelectedPrefill), and
	// Blocks, CachedBlocks, Reason and Candidates describe the prefill
	// stage's choice. Nil for an aggregated selection.
	Prefill *SelectedPrefill
}

// ReasonSession is Selection.Reason when a session binding chose the
// engine: the policy pipeline did not decide, so no candidate has a cost
// or an eligibility.
const ReasonSession = "session"

// CandidateCost is one candidate rank as the decision saw it.
type CandidateCost struct {
	Worker routing.Worker
	// Overlap is the rank's cached prefix of the prompt, per tier.
	Overlap routing.Overlap
	// Load is the rank's potential load if it took the request; Active
	// its current load, which the busy thresholds read.
	Load, Active routing.Load
	// Eligible: the rank passed the filters (pin, busy thresholds).
	Eligible bool
	// Cost is the selector's cost of the rank (lower is better), set only
	// when Costed: the kv selector computes costs, the others do not.
	Cost   float64
	Costed bool
}

// Select runs Route's decision for r (validation, candidates, hashing,
// matching, session affinity, the policy pipeline) without booking it:
// the request's load is not added, so there is nothing to end. The
// decision is recorded in the approximate or side index, and the session
// is settled as a successful request's is (see policy.Decider.Settle):
// a new session is bound to the chosen engine, through the same store as
// routed requests. Select never waits in the admission queue: with every
// candidate busy it returns ErrOverloaded at once. Errors are Route's.
func (d *Dispatcher) Select(ctx context.Context, r *Request) (*Selection, error) {
	var ph phases
	ph.start = d.cfg.Now()
	if err := d.validate(r); err != nil {
		return nil, err
	}
	sc := d.scratch.Get().(*policy.Scratch)
	defer d.scratch.Put(sc)
	q := d.query(r)
	sel, err := d.selectOnce(ctx, sc, r, &q, &ph)
	if errors.Is(err, errEngineGone) {
		sel, err = d.selectOnce(ctx, sc, r, &q, &ph)
	}
	if err != nil {
		d.obs.decisions.rejected(r.Model, err)
		return nil, err
	}
	ph.scheduled = d.cfg.Now()
	d.obs.overhead(&ph)
	d.obs.hitRate(r.Model, sel.CachedBlocks, sel.Blocks)
	return sel, nil
}

// selectOnce is one pass of Select, as attempt is of Route.
func (d *Dispatcher) selectOnce(ctx context.Context, sc *policy.Scratch, r *Request, q *policy.Query, ph *phases) (*Selection, error) {
	if err := d.prepare(sc, r, q, ph); errors.Is(err, errByRole) {
		return d.selectByRole(ctx, sc, r, q, ph)
	} else if err != nil {
		return nil, err
	}
	return d.selectPrepared(ctx, sc, q)
}

// selectPrepared is the choice of selectOnce on prepared candidates.
func (d *Dispatcher) selectPrepared(ctx context.Context, sc *policy.Scratch, q *policy.Query) (*Selection, error) {
	ch, err := d.core.Choose(ctx, sc, q)
	if err != nil {
		return nil, mapPolicyError(err)
	}
	url, ok := d.engines.Endpoint(ch.Worker.ID)
	if !ok {
		return nil, fmt.Errorf("%w: %w: engine %d", ErrNoEngine, errEngineGone, ch.Worker.ID)
	}
	d.obs.decisions.decided(q.Model, sc.Candidates(), ch.CachedBlocks)
	sel := newSelection(sc, &ch, url)
	d.core.Settle(ctx, sc, &ch)
	return sel, nil
}

// newSelection copies the decision out of sc, which is recycled.
func newSelection(sc *policy.Scratch, ch *policy.Choice, url string) *Selection {
	s := &Selection{Worker: ch.Worker, EndpointURL: url, BlockSize: sc.BlockSize(), Blocks: sc.Blocks(),
		CachedBlocks: ch.CachedBlocks, SessionBound: ch.Bound, Reason: ReasonSession}
	cands := sc.Candidates()
	s.Candidates = make([]CandidateCost, len(cands))
	for i := range cands {
		c := &cands[i]
		s.Candidates[i] = CandidateCost{Worker: c.Info.Worker, Overlap: c.Overlap, Load: c.Load, Active: c.Active}
	}
	if !ch.Bound {
		s.costs(sc.Decision())
	}
	return s
}

// costs marks the candidates the pipeline kept and copies their costs.
// The pipeline keeps the candidates' order, so both lists are sorted by
// worker and merge in one pass.
func (s *Selection) costs(dec *policy.Decision) {
	s.Reason = dec.Reason
	j := 0
	for i := range dec.Eligible {
		w := dec.Eligible[i].Info.Worker
		for j < len(s.Candidates) && s.Candidates[j].Worker.Compare(w) < 0 {
			j++
		}
		if j == len(s.Candidates) {
			return
		}
		c := &s.Candidates[j]
		c.Eligible = c.Worker == w
		if c.Eligible && i < len(dec.Costs) {
			c.Cost, c.Costed = dec.Costs[i], true
		}
	}
}

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
