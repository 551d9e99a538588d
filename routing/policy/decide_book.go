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
	// out counts the request's generated tokens (outputCount, below).
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

// outputCount is a booked request's count of generated tokens, and what
// the load tracker has been told of them. It lives in the request's
// Booking, so the request's goroutine updates it without a lock.
type outputCount struct {
	// on is set when the tracker tracks output blocks; otherwise the
	// count is not kept.
	on bool
	// isl and blockSize place the sequence's block boundaries.
	isl, blockSize int64
	// seen is the tokens generated so far, told the tokens reported.
	seen, told int64
}

// newOutputCount returns the count of a request of isl prompt tokens
// booked on t.
func newOutputCount(t *load.Tracker, isl int) outputCount {
	c := t.Config()
	return outputCount{on: c.TrackOutputBlocks, isl: int64(isl), blockSize: int64(c.BlockSize)}
}

// add counts n more tokens and returns how many the tracker should now be
// told: all those not told yet once the sequence (prompt plus output)
// has crossed a block boundary since the last report, the only point at
// which the request's output blocks change, else none. A stream's
// per-token reports then cost an addition and a division each.
func (c *outputCount) add(n int) int64 {
	if !c.on || n <= 0 {
		return 0
	}
	c.seen += int64(n)
	if c.blocks(c.seen) == c.blocks(c.told) {
		return 0
	}
	n64 := c.seen - c.told
	c.told = c.seen
	return n64
}

// blocks is the sequence's blocks after out generated tokens.
func (c *outputCount) blocks(out int64) int64 {
	return (c.isl + out + c.blockSize - 1) / c.blockSize
}

// OutputTokens reports n more tokens generated for the request, as they
// stream (one per chunk) or all at once for an answer that does not
// stream. With output-block tracking (Tracking.OutputBlocks) the load
// tracker hears of them at each block boundary, and the request's output
// load grows, or decays towards its expected length. It reports whether
// the booked load changed, so that the caller can republish it. Without
// output-block tracking it does nothing.
func (b *Booking) OutputTokens(n int) bool {
	if b.d == nil {
		return false
	}
	k := b.out.add(n)
	if k == 0 {
		return false
	}
	// An unknown request (expired or removed) has no load to change.
	return b.t.AddOutputTokens(b.id, int(k)) == nil
}
