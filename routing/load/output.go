package load

import (
	"fmt"
	"math"
)

// milli is the fixed-point unit of output weights: a block of full weight
// counts 1000. A sum of fractional weights kept in floating point would
// drift, and a worker's load must return to exactly zero.
const milli = 1000

// AddOutputTokens records n more generated tokens. A request that generates
// has finished its prefill, so this also does what PrefillComplete does.
// With TrackOutputBlocks (and TrackActiveBlocks), the request's output
// blocks are the ones booked
// at Add from its expected length or, once the sequence (prompt plus
// output) outgrows them, a block per block boundary crossed; their weight
// then decays towards the expected length (outputMilli). Callers report
// tokens as they come or in batches (the router node reports at block
// boundaries): the load depends on the total only.
func (t *Tracker) AddOutputTokens(id string, n int) error {
	if n < 0 {
		return fmt.Errorf("%w: %q: output tokens %d < 0", ErrInvalidRequest, id, n)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.requests[id]
	if a == nil {
		return fmt.Errorf("%w: %q", ErrUnknownRequest, id)
	}
	t.completePrefill(a)
	a.outputTokens += int64(n)
	if t.cfg.TrackOutputBlocks && t.cfg.TrackActiveBlocks {
		w := t.outputMilli(a)
		t.workers[a.worker].outMilli += w - a.outMilli
		a.outMilli = w
	}
	return nil
}

// outputMilli is the weight of a request's output blocks in thousandths
// of a block: max(expected, generated) blocks at full weight, or, with an
// expected output length, at max(0, 1 - OutputDecay*generated/expected).
// The reference router decays the same way; it books no output up front,
// so its output weight starts at zero, grows and falls back, where here it
// starts at the expected output and falls to zero: the output still to
// come, which is the decode work the request still holds the engine for.
func (t *Tracker) outputMilli(a *active) int64 {
	blocks := max(a.expectedOut, t.outputBlocks(a.isl, a.outputTokens))
	if a.expectedTokens == 0 || t.cfg.OutputDecay == 0 {
		return blocks * milli
	}
	left := 1 - t.cfg.OutputDecay*float64(a.outputTokens)/float64(a.expectedTokens)
	return int64(math.Round(float64(blocks*milli) * max(0, left)))
}

// outputBlocks is the blocks that out output tokens add to a prompt of
// isl tokens: the partial tail block of the prompt fills first.
func (t *Tracker) outputBlocks(isl, out int64) int64 {
	return ceilDiv(isl+out, t.blockSize) - ceilDiv(isl, t.blockSize)
}
