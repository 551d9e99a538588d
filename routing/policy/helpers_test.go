package policy

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// rng returns a generator with a fixed seed, so every test is repeatable.
func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// c builds a candidate of engine id (rank 0) with a device overlap and a
// potential load.
func c(id int, device int32, prefill, decode, active int64) Candidate {
	return Candidate{
		Info:    routing.WorkerInfo{Worker: routing.Worker{ID: routing.WorkerID(id)}, BlockSize: 16},
		Overlap: routing.Overlap{Device: device},
		Load:    routing.Load{PrefillTokens: prefill, DecodeBlocks: decode, ActiveRequests: active},
	}
}

// withActive returns c with its active-request count set in both loads.
func withActive(x Candidate, n int64) Candidate {
	x.Load.ActiveRequests, x.Active.ActiveRequests = n, n
	return x
}

// counts runs sel n times and returns how often each candidate won.
func counts(t *testing.T, sel Selector, req *Request, cands []Candidate, n int) []int {
	t.Helper()
	out := make([]int, len(cands))
	var d Decision
	for range n {
		if err := sel.Select(&d, req, cands); err != nil {
			t.Fatal(err)
		}
		out[d.Index]++
	}
	return out
}

// chiSquare is Pearson's statistic of observed counts against expected
// probabilities.
func chiSquare(obs []int, p []float64) float64 {
	total := 0
	for _, o := range obs {
		total += o
	}
	var x float64
	for i, o := range obs {
		e := p[i] * float64(total)
		x += (float64(o) - e) * (float64(o) - e) / e
	}
	return x
}

// near reports whether a and b agree to 1e-9.
func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
