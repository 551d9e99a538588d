package index

import "github.com/kvrouter/kvrouter/routing"

// Range is a half-open run [Start, End) of a request's block positions.
type Range struct {
	Start, End int32
}

// SharedRanges appends to dst, in order, the runs of the request's block
// positions whose block some worker holds on the shared tier
// (routing.TierShared), and returns the extended slice. A shared block is
// no worker's own, so the runs are the same for every worker: each
// worker's shared hits are the positions of the runs beyond its own
// device prefix (HitsBeyond). Unlike FindMatches the scan does not stop
// at the first missing block, since the reference counts every shared run
// beyond the device prefix. It returns dst at once when no worker holds
// anything on the shared tier, so a fleet without one pays one counter
// read per request.
func (e *Exact) SharedRanges(hashes []routing.SeqHash, dst []Range) []Range {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.sharedPairs == 0 {
		return dst
	}
	var buf [2]uint32
	inRun := false
	for i, h := range hashes {
		p := e.blocks.ptr(uint64(h))
		held := p != nil && anyShared(e.lists.view(p, &buf))
		switch {
		case held && inRun:
			dst[len(dst)-1].End = int32(i + 1)
		case held:
			dst = append(dst, Range{Start: int32(i), End: int32(i + 1)})
		}
		inRun = held
	}
	return dst
}

// anyShared reports whether one of the owner words holds the shared tier.
func anyShared(ws []uint32) bool {
	for _, w := range ws {
		if w&sharedBit != 0 {
			return true
		}
	}
	return false
}

// HitsBeyond counts the positions of the sorted runs rs at or beyond
// depth: the shared hits of a worker whose device prefix is depth blocks
// (the reference's shared_hits_beyond_device). Positions below depth are
// on the worker's device already and earn their credit there.
func HitsBeyond(rs []Range, depth int32) int32 {
	var n int32
	for _, r := range rs {
		if r.End > depth {
			n += r.End - max(r.Start, depth)
		}
	}
	return n
}
