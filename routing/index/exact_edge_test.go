package index

import (
	"errors"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

func TestExactManyOwnersOverflow(t *testing.T) {
	x := NewExact()
	const n = 40
	for i := range n {
		w := routing.Worker{ID: routing.WorkerID(n - i)}
		ev := stored(w, 1, dev, blk(1, 1), blk(2, 2), blk(3, uint64(i%3)))
		if err := x.Apply(&ev); err != nil {
			t.Fatal(err)
		}
	}
	got := x.FindMatches(seqs(1, 2, 0), nil)
	if len(got) != n {
		t.Fatalf("%d matches, want %d", len(got), n)
	}
	for _, m := range got {
		want := int32(2)
		if (n-int(m.Worker.ID))%3 == 0 {
			want = 3
		}
		if m.Device != want {
			t.Errorf("worker %v depth %d, want %d", m.Worker, m.Device, want)
		}
	}
	if !slices.IsSortedFunc(got, func(a, b routing.Match) int { return a.Worker.Compare(b.Worker) }) {
		t.Error("matches not sorted by worker")
	}
	for i := range n {
		x.RemoveWorker(routing.Worker{ID: routing.WorkerID(i + 1)})
		checkInvariants(t, x)
	}
	if len(x.lists.free) != len(x.lists.lists) {
		t.Errorf("overflow lists leaked: %d free of %d", len(x.lists.free), len(x.lists.lists))
	}
}

func TestExactFindMatchesAppendsToDst(t *testing.T) {
	x := NewExact()
	ev := stored(w1, 1, dev, blk(10, 1))
	if err := x.Apply(&ev); err != nil {
		t.Fatal(err)
	}
	prefix := []routing.Match{match(w3, 9, 9, 9)}
	got := x.FindMatches(seqs(1), prefix)
	want := []routing.Match{match(w3, 9, 9, 9), match(w1, 1, 0, 0)}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := x.FindMatches(nil, nil); got != nil {
		t.Errorf("empty query gave %v", got)
	}
	if err := x.Apply(nil); !errors.Is(err, routing.ErrBadEvent) {
		t.Errorf("nil event: %v", err)
	}
}

// checkInvariants verifies the index's internal bookkeeping: the pair and
// block counts, sorted owner sets, and that every held pair is reachable
// from its worker's engine-id map (so Cleared finds it).
func checkInvariants(t *testing.T, x *Exact) {
	t.Helper()
	pairs := 0
	reach := map[[2]uint64]bool{}
	for slot := range x.workers {
		x.workers[slot].engines.each(func(_ uint64, s *routing.SeqHash) bool {
			reach[[2]uint64{uint64(slot), uint64(*s)}] = true
			return true
		})
	}
	x.blocks.each(func(k uint64, o *owners) bool {
		var buf [2]uint32
		v := x.lists.view(o, &buf)
		if len(v) == 0 {
			t.Errorf("block %#x kept with no owner", k)
		}
		for i, w := range v {
			if i > 0 && v[i-1]>>tierBits >= w>>tierBits {
				t.Errorf("block %#x owners not sorted: %v", k, v)
			}
			if w&tierMask == 0 {
				t.Errorf("block %#x owner with no tier", k)
			}
			if !reach[[2]uint64{uint64(w >> tierBits), k}] {
				t.Errorf("block %#x of slot %d unreachable from the engine map", k, w>>tierBits)
			}
		}
		pairs += len(v)
		return true
	})
	if pairs != x.pairs {
		t.Errorf("pair count %d, counted %d", x.pairs, pairs)
	}
}

// TestExactLongChainCrossesWindows walks a request longer than the query's
// lookup windows (8, then 16, then 32 blocks) with the tier change and the
// end of the prefix inside later windows.
func TestExactLongChainCrossesWindows(t *testing.T) {
	for _, n := range []int{1, 8, 9, 10, 24, 25, 57, 70} {
		x := NewExact()
		locals := make([]uint64, n)
		var devBlocks, hostBlocks []routing.StoredBlock
		for i := range locals {
			locals[i] = uint64(100 + i)
			b := blk(uint64(i+1), locals[i])
			if i < max(1, n*2/3) {
				devBlocks = append(devBlocks, b)
			} else {
				hostBlocks = append(hostBlocks, b)
			}
		}
		evs := []routing.Event{stored(w1, 1, dev, devBlocks...)}
		if len(hostBlocks) > 0 {
			evs = append(evs, child(w1, 2, host, uint64(len(devBlocks)), hostBlocks...))
		}
		for i := range evs {
			if err := x.Apply(&evs[i]); err != nil {
				t.Fatal(err)
			}
		}
		q := seqs(append(locals, 1, 2, 3)...)
		want := []routing.Match{match(w1, int32(len(devBlocks)), int32(len(hostBlocks)), 0)}
		if got := x.FindMatches(q, nil); !slices.Equal(got, want) {
			t.Errorf("n=%d: got %v, want %v", n, got, want)
		}
	}
}
