package policy

import "github.com/kvrouter/kvrouter/routing/load"

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
