package policy

import "context"

// Settle ends a decision that is not booked: a selection whose caller
// sends the request to the worker itself and books nothing here (the
// node's selection API). The decision is recorded in the approximate or
// side index as a booked one is, and the session is settled as a
// successful request settles it: a request on its bound worker restarts
// the binding's idle timer, and a new session is bound (compare-and-set)
// to the chosen worker, so that a caller that only selects still gets
// session affinity. No load is booked, so there is nothing to end, and an
// LRU approximate index gets the prompt as released at once: no request
// will hold its blocks.
func (d *Decider) Settle(ctx context.Context, sc *Scratch, ch *Choice) {
	w := ch.Worker
	d.releaseApprox(d.record(sc, &sc.cands[ch.index].Info))
	d.holdSession(ctx, &ch.s, w, ch.Bound, sc.plan.now)
	d.commitBinding(ctx, &ch.s, w)
	d.releaseSession(ctx, &ch.s)
}

// Decision is the pipeline's decision of the last Choose on sc, with
// every eligible candidate's cost when the selector computes costs. It
// describes the choice only when the Choice was not Bound: a session
// binding decides without the pipeline, or over its result. It belongs
// to sc and is valid until sc's next use.
func (sc *Scratch) Decision() *Decision { return &sc.dec }
