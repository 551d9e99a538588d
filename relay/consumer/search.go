package consumer

import (
	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/routing"
)

// prefixDepth returns the longest prefix of hs that probably is present in
// f, assuming membership is prefix-monotone (an engine caches a block only
// with every block before it). It probes position 0, gallops over 1, 2, 4,
// ... until the first miss, binary searches between the last hit and that
// miss (or the end), then verifies the window positions just below the
// found depth linearly and cuts the depth at the first miss among them.
//
// Galloping makes the cost grow with the log of the answer, not of the
// request, and stops after one probe for lanes that miss at once, the
// common case. The binary search probes only O(log n) positions, so a
// false positive at one of them can make it step over absent blocks; the
// blocks just below the found depth are where the search converged through
// hits, and the window re-tests them. The position just below the depth is
// the search's last hit, so it is not probed again: a window of w costs
// w-1 probes.
//
// Query runs this search lane by lane under the domain's read lock; Best
// (best.go) asks a narrower question with far fewer probes.
// Other shapes were prototyped and measured against it
// (docs/benchmarks.md): lanes in lockstep rounds, so that a round's cache
// misses overlap, also with every round's reads issued before any was
// tested, and a branch-free binary search over all lanes interleaved,
// were faster with cold filters at best by a third and slower with hot
// ones; prefetching a round's buckets explicitly gained nothing; a
// transposed second copy of a domain's lanes, one row read per probe
// position for all of them, was fastest cold but slower hot and doubled
// the memory. On the later AMD EPYC machines, lockstep rounds were again
// a fifth faster cold and twice as slow hot, and lanes of one shared
// geometry stored only transposed, with every galloping position read in
// the first round, were no faster cold: each of these reads a few hundred
// cache lines per cold query. The search is plain loops rather than a resumable state
// machine (the shape the lockstep prototypes needed), which made a hot
// 16-lane query about a third faster.
func prefixDepth(f filter.Summary, hs []routing.SeqHash, window int) int {
	d, _ := prefixSearch(f, hs, window)
	return d
}

// prefixSearch is prefixDepth that also counts its filter probes, for the
// tests and benchmarks that compare searches.
func prefixSearch(f filter.Summary, hs []routing.SeqHash, window int) (depth, probes int) {
	n := len(hs)
	if n == 0 {
		return 0, 0
	}
	if probes++; !f.Contains(hs[0]) {
		return 0, probes
	}
	// hs[lo] is a hit; hs[hi] is a miss, or hi == n.
	lo, hi := 0, n
	for p := 1; p < n; p <<= 1 {
		if probes++; !f.Contains(hs[p]) {
			hi = p
			break
		}
		lo = p
	}
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if probes++; f.Contains(hs[mid]) {
			lo = mid
		} else {
			hi = mid
		}
	}
	for p := max(hi-window, 1); p < lo; p++ {
		if probes++; !f.Contains(hs[p]) {
			return p, probes
		}
	}
	return hi, probes
}
