package policy

import (
	"math"
	"math/rand/v2"
	"sync"
)

// lockedRand serialises a selector's use of its injected generator, which
// is not safe for concurrent use on its own.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// intN returns a uniform integer in [0, n); n must be positive.
func (l *lockedRand) intN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

// float64 returns a uniform number in [0, 1).
func (l *lockedRand) float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}

// argmin returns the index of the lowest cost, choosing uniformly at random
// among exact ties by reservoir sampling: the k-th tie seen replaces the
// current choice with probability 1/k. Uniform tie-breaking spreads
// identical requests over identical idle workers instead of piling them on
// the first. The generator is locked only once a tie appears.
func argmin(costs []float64, r *lockedRand) int {
	best, ties, locked := 0, 1, false
	for i := 1; i < len(costs); i++ {
		switch c := costs[i]; {
		case c < costs[best]:
			best, ties = i, 1
		case c == costs[best]:
			if !locked {
				r.mu.Lock()
				locked = true
			}
			ties++
			if r.r.IntN(ties) == 0 {
				best = i
			}
		}
	}
	if locked {
		r.mu.Unlock()
	}
	return best
}

// softmax samples an index with probability proportional to
// exp(-(c_i - c_min) / ((c_max - c_min) * t)), t > 0. Normalising by the
// cost range makes the temperature scale-free: at t = 1 the cheapest worker
// is e times as likely as the dearest, whatever the units. Equal costs are
// sampled uniformly.
func softmax(costs []float64, t float64, r *lockedRand) int {
	lo, hi := costs[0], costs[0]
	for _, c := range costs[1:] {
		lo, hi = min(lo, c), max(hi, c)
	}
	if hi == lo {
		return r.intN(len(costs))
	}
	scale := (hi - lo) * t
	var sum float64
	for _, c := range costs {
		sum += math.Exp(-(c - lo) / scale)
	}
	u := r.float64() * sum
	for i, c := range costs {
		u -= math.Exp(-(c - lo) / scale)
		if u < 0 {
			return i
		}
	}
	return len(costs) - 1 // rounding left u at or above zero: the last index
}
