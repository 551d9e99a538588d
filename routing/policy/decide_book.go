package policy

import (
	"context"
	"fmt"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/load"
)

// Book reserves the request's load on the chosen worker, records the
// decision in the approximate or side index, and makes a request on its
// session's bound worker hold the binding. The Booking ends the request.
func (d *Decider) Book(ctx context.Context, sc *Scratch, q *Query, ch *Choice) (Booking, error) {
	p := &sc.plan
	w := ch.Worker
	lr := load.Request{ID: q.ID, Worker: w, Hashes: sc.trackerHashes(), ISLTokens: p.isl, OutputTokens: p.osl, CachedBlocks: ch.CachedBlocks}
	if err := p.tracker.Add(lr, p.now); err != nil {
		return Booking{}, fmt.Errorf("%w: booking: %w", ErrInvalidRequest, err)
	}
	lease := d.record(sc, &sc.cands[ch.index].Info)
	d.holdSession(ctx, &ch.s, w, ch.Bound, p.now)
	b := Booking{d: d, id: q.ID, t: p.tracker, w: w, s: ch.s, lease: lease}
	b.out = newOutputCount(p.tracker, p.isl)
	return b, nil
}

// record teaches the Decider's own indexes the decision: the text index
// for text, the approximate index in approximate mode, else the side
// index when predicting. It returns the approximate index's lease (LRU),
// which the booking releases. A failure only costs future overlap, so it
// is logged.
func (d *Decider) record(sc *Scratch, info *routing.WorkerInfo) index.Lease {
	var lease index.Lease
	var err error
	switch {
	case sc.Text:
		_, err = d.text.Record(info.Worker, sc.Hashes, sc.plan.now)
	case d.cfg.ApproximateMode:
		lease, err = d.recordApprox(info, sc.Hashes, sc.plan.now)
	case d.side != nil:
		_, err = d.side.Record(info.Worker, sc.Hashes, sc.plan.now)
	}
	if err != nil {
		d.cfg.Log.Warn("recording a routing decision", "worker", info.Worker.String(), "err", err)
	}
	return lease
}

// Outcome is how a booked request ended.
type Outcome uint8

const (
	// Succeeded: the engine served the request.
	Succeeded Outcome = iota
	// Failed: the request failed after reaching its engine, or the client
	// left.
	Failed
	// Unreachable: nothing was sent, the engine could not be reached; it
	// becomes a suspect for the suspect timeout.
	Unreachable
)

// Booking is one booked request's state. Its methods are called from the
// request's goroutine, so it needs no lock; the zero value does nothing.
type Booking struct {
	d  *Decider
	id string
	t  *load.Tracker
	w  routing.Worker
	s  session
	// lease holds the request's blocks in the LRU approximate index
	// until Done; 0 under TTL.
	lease index.Lease
	// out counts the request's generated tokens (decide_output.go).
	out outputCount
}

// Worker is the booked worker.
func (b *Booking) Worker() routing.Worker { return b.w }

// Active is the booked worker's current load by the bookings.
func (b *Booking) Active() routing.Load {
	if b.t == nil {
		return routing.Load{}
	}
	return b.t.Active(b.w)
}

// FirstToken ends the request's prefill load and, as the first proof of a
// successful dispatch, binds a new session.
func (b *Booking) FirstToken(ctx context.Context) {
	if b.d == nil {
		return
	}
	_ = b.t.PrefillComplete(b.id) // unknown when expired or removed: nothing to end
	b.d.commitBinding(ctx, &b.s, b.w)
}

// Done frees the request's load, binds a new session on success (when no
// first token was reported), releases the session's hold and ends a final
// session. An unreachable engine becomes a suspect first.
func (b *Booking) Done(ctx context.Context, o Outcome) {
	if b.d == nil {
		return
	}
	if o == Unreachable {
		b.d.suspect(b.w.ID)
	}
	b.t.Free(b.id)
	b.d.releaseApprox(b.lease)
	if o == Succeeded {
		b.d.commitBinding(ctx, &b.s, b.w)
	}
	b.d.releaseSession(ctx, &b.s)
}

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
