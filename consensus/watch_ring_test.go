package consensus

import (
	"errors"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// sealHashes records n stored hashes for one rank and seals them as index.
func sealHashes(l *OwnershipLog, index uint64, n int) {
	w := routing.Worker{ID: 7}
	for i := range n {
		l.stored(w, routing.SeqHash(index<<16|uint64(i)))
	}
	if n == 0 {
		l.rankCleared(w)
	}
	l.seal(index)
}

func TestOwnershipLogBounds(t *testing.T) {
	tests := []struct {
		name            string
		batches, hashes int
		sizes           []int // hashes per entry, entries at index 10, 20, 30...
		wantStart       uint64
		wantIndexes     []uint64
	}{
		{name: "within bounds", batches: 8, hashes: 100, sizes: []int{1, 2, 3}, wantStart: 5, wantIndexes: []uint64{10, 20, 30}},
		{name: "batch bound", batches: 2, hashes: 100, sizes: []int{1, 2, 3}, wantStart: 10, wantIndexes: []uint64{20, 30}},
		{name: "hash bound", batches: 8, hashes: 4, sizes: []int{3, 2, 3}, wantStart: 20, wantIndexes: []uint64{30}},
		{name: "newest kept over the hash bound", batches: 8, hashes: 2, sizes: []int{1, 9}, wantStart: 10, wantIndexes: []uint64{20}},
		{name: "clears count as batches", batches: 2, hashes: 1, sizes: []int{0, 0, 0}, wantStart: 10, wantIndexes: []uint64{20, 30}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newOwnershipLog(5)
			l.SetLimits(tc.batches, tc.hashes)
			for i, n := range tc.sizes {
				sealHashes(l, uint64(10*(i+1)), n)
			}
			if got := l.Start(); got != tc.wantStart {
				t.Fatalf("start %d, want %d", got, tc.wantStart)
			}
			bs, err := l.Since(tc.wantStart, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for _, b := range bs {
				got = append(got, b.Index)
			}
			if len(got) != len(tc.wantIndexes) {
				t.Fatalf("indexes %v, want %v", got, tc.wantIndexes)
			}
			for i := range got {
				if got[i] != tc.wantIndexes[i] {
					t.Fatalf("indexes %v, want %v", got, tc.wantIndexes)
				}
			}
			if _, err := l.Since(tc.wantStart-1, nil, 0); !errors.Is(err, ErrWatchOverrun) {
				t.Fatalf("Since below start: %v, want ErrWatchOverrun", err)
			}
		})
	}
}

func TestOwnershipLogSince(t *testing.T) {
	l := newOwnershipLog(0)
	for i := range 5 {
		sealHashes(l, uint64(10*(i+1)), 1)
	}
	l.seal(60) // nothing pending: no batch
	tests := []struct {
		name      string
		from      uint64
		max       int
		wantFirst uint64
		wantN     int
	}{
		{name: "from start", from: 0, wantFirst: 10, wantN: 5},
		{name: "between batches", from: 25, wantFirst: 30, wantN: 3},
		{name: "at a batch", from: 30, wantFirst: 40, wantN: 2},
		{name: "limited", from: 0, max: 2, wantFirst: 10, wantN: 2},
		{name: "ahead of the log", from: 99, wantN: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bs, err := l.Since(tc.from, nil, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			if len(bs) != tc.wantN || (tc.wantN > 0 && bs[0].Index != tc.wantFirst) {
				t.Fatalf("got %d batches starting %+v, want %d from %d", len(bs), bs, tc.wantN, tc.wantFirst)
			}
		})
	}
}

func TestOwnershipLogMergesChanges(t *testing.T) {
	l := newOwnershipLog(0)
	a, b := routing.Worker{ID: 1}, routing.Worker{ID: 1, Rank: 1}
	l.stored(a, 1)
	l.stored(a, 2)
	l.removed(a, 1)
	l.stored(b, 3)
	l.rankCleared(b)
	l.workerRemoved(1)
	l.seal(4)
	bs, _ := l.Since(0, nil, 0)
	want := []routing.Change{
		{Kind: routing.ChangeStored, Worker: a, Hashes: []routing.SeqHash{1, 2}},
		{Kind: routing.ChangeRemoved, Worker: a, Hashes: []routing.SeqHash{1}},
		{Kind: routing.ChangeStored, Worker: b, Hashes: []routing.SeqHash{3}},
		{Kind: routing.ChangeRankCleared, Worker: b},
		{Kind: routing.ChangeWorkerRemoved, Worker: routing.Worker{ID: 1}},
	}
	if len(bs) != 1 || len(bs[0].Changes) != len(want) {
		t.Fatalf("got %+v", bs)
	}
	for i, c := range bs[0].Changes {
		if c.Kind != want[i].Kind || c.Worker != want[i].Worker || len(c.Hashes) != len(want[i].Hashes) {
			t.Fatalf("change %d: %+v, want %+v", i, c, want[i])
		}
		for j := range c.Hashes {
			if c.Hashes[j] != want[i].Hashes[j] {
				t.Fatalf("change %d: %+v, want %+v", i, c, want[i])
			}
		}
	}
}

// TestOwnershipLogWakes checks that Changed fires on a push and on a reset.
func TestOwnershipLogWakes(t *testing.T) {
	l := newOwnershipLog(0)
	ch := l.Changed()
	l.seal(1)
	select {
	case <-ch:
		t.Fatal("woken by an entry without changes")
	default:
	}
	sealHashes(l, 2, 1)
	<-ch
	ch = l.Changed()
	l.reset(9)
	<-ch
	if l.Start() != 9 || l.Last() != 9 || l.Stats().Batches != 0 {
		t.Fatalf("after reset: %+v start %d", l.Stats(), l.Start())
	}
}

// TestOwnershipLogAllocs checks the hot path's allocation budget: recording
// is free and sealing an entry costs two allocations once the ring is at
// its bound.
func TestOwnershipLogAllocs(t *testing.T) {
	l := newOwnershipLog(0)
	l.SetLimits(16, 1<<20)
	idx := uint64(0)
	entry := func() {
		idx++
		w := routing.Worker{ID: routing.WorkerID(idx % 4)}
		for i := range 256 {
			l.stored(w, routing.SeqHash(i))
		}
		l.seal(idx)
	}
	for range 64 {
		entry()
	}
	if got := testing.AllocsPerRun(200, entry); got > 2 {
		t.Fatalf("%.1f allocations per sealed entry, want at most 2", got)
	}
	if got := testing.AllocsPerRun(200, func() { idx++; l.seal(idx) }); got != 0 {
		t.Fatalf("%.1f allocations for an entry without changes, want 0", got)
	}
}
