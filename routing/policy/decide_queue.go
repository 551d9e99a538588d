package policy

import (
	"slices"

	"github.com/kvrouter/kvrouter/routing"
)

// What the admission queue (routing/queue, driven by node/dispatch and
// sim) needs of the Decider: the best cached prefix, for classification
// and the queue's cost, and whether any worker is free, for its
// readiness test. Both read what Candidates and Match left in a Scratch,
// so the queue decides on the same candidates and loads the pipeline
// sees.

// thresholds are q's busy thresholds: its own, else the configured ones.
func (d *Decider) thresholds(q *Query) *Thresholds {
	if q.Thresholds != nil {
		return q.Thresholds
	}
	return &d.cfg.Thresholds
}

// BestCachedTokens is the longest cached prefix over the candidates, in
// tokens, once Match has run (text chunks count as their token estimate).
func (sc *Scratch) BestCachedTokens() int {
	best := 0
	for i := range sc.cands {
		best = max(best, int(sc.cands[i].Overlap.Device))
	}
	if sc.Text {
		return best * textTokensPerChunk
	}
	return best * sc.plan.blockSize
}

// CurrentLoads sets every candidate's Active load (its bookings plus
// what its engine reports beyond them) without projecting a request, for
// Free.
func (d *Decider) CurrentLoads(sc *Scratch) {
	t := sc.plan.tracker
	for i := range sc.cands {
		c := &sc.cands[i]
		c.Active = routing.Load{}
		if t != nil {
			c.Active = t.Active(c.Info.Worker)
		}
		if d.cfg.Reports != nil {
			if rep, ok := d.cfg.Reports.Load(c.Info.Worker); ok {
				c.Active = add(c.Active, excess(d.cfg.Tracking.mask(rep), c.Active))
			}
		}
	}
}

// Free counts the candidates (only the ranks of the engines in only, when
// only is not nil: a pinned request's engine, or an allowed set) under
// both the request's busy thresholds and extra (a policy class's), after
// CurrentLoads.
func (sc *Scratch) Free(only []routing.WorkerID, extra *Thresholds) int {
	n := 0
	for i := range sc.cands {
		c := &sc.cands[i]
		if only != nil && !slices.Contains(only, c.Info.Worker.ID) {
			continue
		}
		if !sc.plan.th.Busy(c) && (extra == nil || !extra.Busy(c)) {
			n++
		}
	}
	return n
}
