package sim

import (
	"slices"
	"time"
)

// Percentile returns the q-quantile (0..1) of xs by the nearest-rank method;
// xs is sorted in place. It returns 0 for an empty sample.
func Percentile(xs []time.Duration, q float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(q*float64(len(xs))+0.999999) - 1
	i = max(0, min(i, len(xs)-1))
	return xs[i]
}

// Mean returns the arithmetic mean of xs, or 0 for an empty sample.
func Mean(xs []time.Duration) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	var s time.Duration
	for _, x := range xs {
		s += x
	}
	return s / time.Duration(len(xs))
}

// MaxOverMean is max(xs)/mean(xs): 1 is a perfect balance. It returns 0 when
// there is no work at all.
func MaxOverMean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s, m float64
	for _, x := range xs {
		s += x
		m = max(m, x)
	}
	if s == 0 {
		return 0
	}
	return m / (s / float64(len(xs)))
}
