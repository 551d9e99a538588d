package index

import (
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// TestSharedRanges: blocks stored on the shared tier by any worker form
// the request's shared runs, which count for every worker beyond its own
// device prefix; they are no worker's own overlap; removing them ends the
// runs.
func TestSharedRanges(t *testing.T) {
	x := NewExact()
	q := seqs(1, 2, 3, 4, 5, 6)
	if got := x.SharedRanges(q, nil); got != nil {
		t.Fatalf("empty index: %v", got)
	}
	// w1 holds blocks 0-1 on the device; w2 put blocks 0-2 and, under
	// another chain of events, 4-5 in the shared store.
	mustApply(t, x, stored(w1, 1, routing.TierDevice, blk(10, 1), blk(11, 2)))
	mustApply(t, x, stored(w2, 1, routing.TierShared, blk(20, 1), blk(21, 2), blk(22, 3)))
	mustApply(t, x, child(w2, 2, routing.TierShared, 22, blk(23, 4)))
	mustApply(t, x, child(w2, 3, routing.TierShared, 23, blk(24, 5), blk(25, 6)))
	mustApply(t, x, removed(w2, 4, routing.TierShared, 23))
	got := x.SharedRanges(q, nil)
	if want := []Range{{0, 3}, {4, 6}}; !slices.Equal(got, want) {
		t.Fatalf("shared runs %v, want %v", got, want)
	}
	if m := x.FindMatches(q, nil); !slices.Equal(m, []routing.Match{match(w1, 2, 0, 0)}) {
		t.Fatalf("matches %v: the shared tier is no worker's own prefix", m)
	}
	for _, tc := range []struct{ depth, want int32 }{{0, 5}, {2, 3}, {3, 2}, {5, 1}, {6, 0}} {
		if n := HitsBeyond(got, tc.depth); n != tc.want {
			t.Errorf("HitsBeyond(%d) = %d, want %d", tc.depth, n, tc.want)
		}
	}
	if s := x.Stats(); s.SharedPairs != 5 {
		t.Fatalf("SharedPairs %d, want 5", s.SharedPairs)
	}
	x.RemoveWorker(w2)
	if got := x.SharedRanges(q, nil); got != nil || x.Stats().SharedPairs != 0 {
		t.Fatalf("after w2 left: %v, %d pairs", got, x.Stats().SharedPairs)
	}
}

func mustApply(t *testing.T, x *Exact, ev routing.Event) {
	t.Helper()
	if err := x.Apply(&ev); err != nil {
		t.Fatal(err)
	}
}
