package load

import (
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// TestSpareMapCarriesNoState checks that the reference-count map recycled
// from a worker that went idle starts empty for the next worker: the same
// blocks booked again count as fresh, on another worker and on the first.
func TestSpareMapCarriesNoState(t *testing.T) {
	tests := []struct {
		name string
		next routing.Worker
	}{
		{name: "another worker", next: routing.Worker{ID: 2}},
		{name: "the same worker", next: routing.Worker{ID: 1}},
	}
	prompt := chain(1, 2, 3, 4)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(t, DefaultConfig(16))
			mustAdd(t, tr, Request{ID: "a", Worker: routing.Worker{ID: 1}, Hashes: prompt, ISLTokens: 64}, t0)
			tr.Free("a")
			assertIdle(t, tr)
			mustAdd(t, tr, Request{ID: "b", Worker: tc.next, Hashes: prompt[:3], ISLTokens: 50}, t0)
			mustAdd(t, tr, Request{ID: "c", Worker: tc.next, Hashes: prompt, ISLTokens: 64}, t0)
			// b holds 3 shared blocks and a private tail; c adds one more
			// shared block: 5 blocks in all.
			if got := tr.Active(tc.next).DecodeBlocks; got != 5 {
				t.Fatalf("decode blocks %d, want 5", got)
			}
			tr.Free("b")
			tr.Free("c")
			assertIdle(t, tr)
		})
	}
}

// TestSparesServeWorkersGoingIdleInTurn: two workers that each go idle
// between their requests, in turn, reuse the emptied reference tables
// instead of building one per request (with a single spare, each idle
// worker's table pushed out the other's).
func TestSparesServeWorkersGoingIdleInTurn(t *testing.T) {
	tr := newTracker(t, DefaultConfig(64))
	w1, w2 := routing.Worker{ID: 1}, routing.Worker{ID: 2}
	long := make([]uint64, 192)
	for i := range long {
		long[i] = uint64(i + 1)
	}
	prompt := chain(long...)
	a := Request{ID: "a", Worker: w1, Hashes: prompt, ISLTokens: 64 * 192}
	b := Request{ID: "b", Worker: w2, Hashes: prompt, ISLTokens: 64 * 192}
	round := func() {
		mustAdd(t, tr, a, t0)
		mustAdd(t, tr, b, t0)
		tr.Free("a")
		tr.Free("b")
	}
	round() // builds the two tables
	if allocs := testing.AllocsPerRun(20, round); allocs != 0 {
		t.Fatalf("%.1f allocations per round of two requests on two workers going idle in turn", allocs)
	}
}
