package consumer

import (
	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/routing"
)

// cursor is one lane's prefix search as a state machine: pos names the next
// position to probe, step takes the probe's answer. The split keeps the
// search independent of how probes are issued. Query runs one cursor per
// lane, lane by lane. Three alternatives were prototyped and measured
// against it (docs/benchmarks.md): lanes in lockstep rounds, so that a
// round's cache misses overlap, were faster with cold filters but about
// twice as slow with hot ones; prefetching a round's buckets explicitly
// gained nothing, the cold time going to page walks; a transposed second
// copy of a domain's lanes, one row read per probe position for all of
// them, was fastest cold but slower hot and doubled the memory. Requests
// sharing prefixes keep their lanes' buckets hot and most domains have
// far fewer than 16 lanes, so the simpler lane-by-lane search stays.
//
// The search finds the longest prefix of hs that probably is present,
// assuming membership is prefix-monotone (an engine caches a block only
// with every block before it). It probes position 0, gallops over 1, 2, 4,
// ... until the first miss, binary searches between the last hit and that
// miss (or the end), then verifies the window positions just below the
// found depth linearly and cuts the depth at the first miss among them.
// Galloping makes the cost grow with the log of the answer, not of the
// request, and stops after one probe for lanes that miss at once, the
// common case. The binary search probes only O(log n) positions, so a
// false positive at one of them can make it step over absent blocks; the
// blocks just below the found depth are where the search converged through
// hits, and the window re-tests them at the cost of window probes.
type cursor struct {
	n, window int
	phase     phase
	lo, hi, p int
	depth     int
}

// phase is the stage of a cursor's search.
type phase uint8

const (
	phaseStart phase = iota
	phaseGallop
	phaseBisect
	phaseVerify
	phaseDone
)

// newCursor starts a search over n positions.
func newCursor(n, window int) cursor {
	c := cursor{n: n, window: window}
	if n == 0 {
		c.phase = phaseDone
	}
	return c
}

// pos returns the next position to probe, or -1 when the search is done.
func (c *cursor) pos() int {
	switch c.phase {
	case phaseStart:
		return 0
	case phaseGallop, phaseVerify:
		return c.p
	case phaseBisect:
		return int(uint(c.lo+c.hi) >> 1)
	}
	return -1
}

// step records whether the probe at pos() hit and advances the search.
func (c *cursor) step(hit bool) {
	switch c.phase {
	case phaseStart:
		if !hit {
			c.finish(0)
			return
		}
		c.phase, c.p = phaseGallop, 1
	case phaseGallop:
		if !hit {
			c.hi = c.p
		} else {
			c.lo, c.p = c.p, c.p<<1
		}
	case phaseBisect:
		if mid := c.pos(); hit {
			c.lo = mid
		} else {
			c.hi = mid
		}
	case phaseVerify:
		if !hit {
			c.finish(c.p)
			return
		}
		c.p++
	}
	c.settle()
}

// settle moves to the next phase when the current one has its answer.
func (c *cursor) settle() {
	if c.phase == phaseGallop && c.hi == 0 && c.p >= c.n {
		c.hi = c.n
	}
	if c.phase == phaseGallop && c.hi != 0 {
		c.phase = phaseBisect
	}
	if c.phase == phaseBisect && c.hi-c.lo <= 1 {
		c.phase, c.depth, c.p = phaseVerify, c.hi, max(c.hi-c.window, 1)
	}
	if c.phase == phaseVerify && c.p >= c.depth {
		c.finish(c.depth)
	}
}

// finish ends the search at depth d.
func (c *cursor) finish(d int) { c.phase, c.depth = phaseDone, d }

// prefixDepth runs one cursor to completion on f.
func prefixDepth(f *filter.Cuckoo, hs []routing.SeqHash, window int) int {
	c := newCursor(len(hs), window)
	for p := c.pos(); p >= 0; p = c.pos() {
		c.step(f.Contains(hs[p]))
	}
	return c.depth
}
