package index

import (
	"errors"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

type step struct {
	ev  routing.Event
	err error
}

const (
	dev  = routing.TierDevice
	host = routing.TierHost
	disk = routing.TierDisk
)

func TestExactEvents(t *testing.T) {
	cases := []struct {
		name   string
		steps  []step
		query  []routing.SeqHash
		want   []routing.Match
		cursor uint64
		pairs  int
	}{
		{
			name:   "stored chain without parent",
			steps:  []step{{ev: stored(w1, 1, dev, blk(10, 1), blk(11, 2), blk(12, 3))}},
			query:  seqs(1, 2, 3, 4),
			want:   []routing.Match{match(w1, 3, 0, 0)},
			cursor: 1, pairs: 3,
		},
		{
			name: "stored with parent chains on the parent's sequence hash",
			steps: []step{
				{ev: stored(w1, 1, dev, blk(10, 1))},
				{ev: child(w1, 2, dev, 10, blk(11, 2), blk(12, 3))},
			},
			query:  seqs(1, 2, 3),
			want:   []routing.Match{match(w1, 3, 0, 0)},
			cursor: 2, pairs: 3,
		},
		{
			name: "unknown parent places nothing but consumes the id",
			steps: []step{
				{ev: stored(w1, 1, dev, blk(10, 1))},
				{ev: child(w1, 2, dev, 99, blk(11, 2)), err: ErrUnknownParent},
				{ev: child(w1, 3, dev, 10, blk(12, 5))},
			},
			query:  seqs(1, 2),
			want:   []routing.Match{match(w1, 1, 0, 0)},
			cursor: 3, pairs: 2,
		},
		{
			name: "duplicate id is stale and ignored",
			steps: []step{
				{ev: stored(w1, 1, dev, blk(10, 1))},
				{ev: removed(w1, 1, dev, 10), err: ErrStale},
			},
			query:  seqs(1),
			want:   []routing.Match{match(w1, 1, 0, 0)},
			cursor: 1, pairs: 1,
		},
		{
			name: "gap applies nothing and keeps the cursor",
			steps: []step{
				{ev: stored(w1, 1, dev, blk(10, 1))},
				{ev: removed(w1, 3, dev, 10), err: ErrGap},
			},
			query:  seqs(1),
			want:   []routing.Match{match(w1, 1, 0, 0)},
			cursor: 1, pairs: 1,
		},
		{
			name:   "first event of a new worker above 1 is a gap",
			steps:  []step{{ev: stored(w1, 5, dev, blk(10, 1)), err: ErrGap}},
			query:  seqs(1),
			cursor: 0,
		},
		{
			name: "id 1 after a higher cursor is a restart that clears the worker",
			steps: []step{
				{ev: stored(w1, 1, dev, blk(10, 1), blk(11, 2))},
				{ev: stored(w1, 2, dev, blk(20, 7))},
				{ev: stored(w1, 1, dev, blk(30, 1))},
			},
			query:  seqs(1, 2),
			want:   []routing.Match{match(w1, 1, 0, 0)},
			cursor: 1, pairs: 1,
		},
		{
			name: "id 1 after cursor 1 is a duplicate, not a restart",
			steps: []step{
				{ev: stored(w1, 1, dev, blk(10, 1), blk(11, 2))},
				{ev: stored(w1, 1, dev, blk(30, 9)), err: ErrStale},
			},
			query:  seqs(1, 2),
			want:   []routing.Match{match(w1, 2, 0, 0)},
			cursor: 1, pairs: 2,
		},
		{
			name: "removed drops the block on its tier",
			steps: []step{
				{ev: stored(w1, 1, dev, blk(10, 1), blk(11, 2), blk(12, 3))},
				{ev: removed(w1, 2, dev, 12)},
			},
			query:  seqs(1, 2, 3),
			want:   []routing.Match{match(w1, 2, 0, 0)},
			cursor: 2, pairs: 2,
		},
		{
			name: "unknown removal is an idempotent no-op",
			steps: []step{
				{ev: stored(w1, 1, dev, blk(10, 1))},
				{ev: removed(w1, 2, dev, 77)},
				{ev: removed(w1, 3, host, 10)},
			},
			query:  seqs(1),
			want:   []routing.Match{match(w1, 1, 0, 0)},
			cursor: 3, pairs: 1,
		},
		{
			name: "cleared drops everything of the worker only",
			steps: []step{
				{ev: stored(w1, 1, dev, blk(10, 1), blk(11, 2))},
				{ev: stored(w2, 1, dev, blk(50, 1))},
				{ev: cleared(w1, 2)},
			},
			query:  seqs(1, 2),
			want:   []routing.Match{match(w2, 1, 0, 0)},
			cursor: 2, pairs: 1,
		},
		{
			name: "host run continues the device prefix",
			steps: []step{
				{ev: stored(w1, 1, dev, blk(10, 1), blk(11, 2))},
				{ev: child(w1, 2, host, 11, blk(12, 3), blk(13, 4))},
			},
			query:  seqs(1, 2, 3, 4, 5),
			want:   []routing.Match{match(w1, 2, 2, 0)},
			cursor: 2, pairs: 4,
		},
		{
			name: "disk run continues the host run",
			steps: []step{
				{ev: stored(w1, 1, dev, blk(10, 1))},
				{ev: child(w1, 2, host, 10, blk(11, 2))},
				{ev: child(w1, 3, disk, 11, blk(12, 3), blk(13, 4))},
			},
			query:  seqs(1, 2, 3, 4),
			want:   []routing.Match{match(w1, 1, 1, 2)},
			cursor: 3, pairs: 4,
		},
		{
			name: "disk run may follow the device prefix directly",
			steps: []step{
				{ev: stored(w1, 1, dev, blk(10, 1))},
				{ev: child(w1, 2, disk, 10, blk(11, 2))},
			},
			query:  seqs(1, 2),
			want:   []routing.Match{match(w1, 1, 0, 1)},
			cursor: 2, pairs: 2,
		},
		{
			name: "prefix held only on host",
			steps: []step{
				{ev: stored(w1, 1, host, blk(10, 1), blk(11, 2))},
			},
			query:  seqs(1, 2),
			want:   []routing.Match{match(w1, 0, 2, 0)},
			cursor: 1, pairs: 2,
		},
		{
			name: "a device block after the host run does not extend it",
			steps: []step{
				{ev: stored(w1, 1, dev, blk(10, 1))},
				{ev: child(w1, 2, host, 10, blk(11, 2))},
				{ev: child(w1, 3, dev, 11, blk(12, 3))},
			},
			query:  seqs(1, 2, 3),
			want:   []routing.Match{match(w1, 1, 1, 0)},
			cursor: 3, pairs: 3,
		},
		{
			name: "same block on two tiers; removing one tier keeps the other",
			steps: []step{
				{ev: stored(w1, 1, dev, blk(10, 1), blk(11, 2))},
				{ev: stored(w1, 2, host, blk(10, 1), blk(11, 2))},
				{ev: removed(w1, 3, dev, 11)},
			},
			query:  seqs(1, 2),
			want:   []routing.Match{match(w1, 1, 1, 0)},
			cursor: 3, pairs: 2,
		},
		{
			name: "shared prefix across workers sorted by worker",
			steps: []step{
				{ev: stored(w3, 1, dev, blk(90, 1), blk(91, 2), blk(92, 3))},
				{ev: stored(w2, 1, dev, blk(50, 1), blk(51, 2))},
				{ev: stored(w1, 1, dev, blk(10, 1))},
			},
			query:  seqs(1, 2, 3),
			want:   []routing.Match{match(w1, 1, 0, 0), match(w2, 2, 0, 0), match(w3, 3, 0, 0)},
			cursor: 1, pairs: 6,
		},
		{
			name: "reused engine id replaces the old block",
			steps: []step{
				{ev: stored(w1, 1, dev, blk(10, 1))},
				{ev: stored(w1, 2, dev, blk(10, 5))},
			},
			query:  seqs(1),
			cursor: 2, pairs: 1,
		},
		{
			name: "malformed event is rejected",
			steps: []step{
				{ev: routing.Event{Worker: w1, ID: 1, Kind: routing.EventStored}, err: routing.ErrBadEvent},
				{ev: routing.Event{Worker: w1, ID: 0, Kind: routing.EventCleared}, err: routing.ErrBadEvent},
				{ev: routing.Event{Worker: w1, ID: 1, Kind: routing.EventCleared, Tier: 7}, err: routing.ErrBadEvent},
			},
			query: seqs(1),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := NewExact()
			for i, s := range tc.steps {
				if err := x.Apply(&s.ev); !errors.Is(err, s.err) || (err == nil) != (s.err == nil) {
					t.Fatalf("step %d: err %v, want %v", i, err, s.err)
				}
			}
			if got := x.FindMatches(tc.query, nil); !slices.Equal(got, tc.want) {
				t.Errorf("matches %v, want %v", got, tc.want)
			}
			if c, _ := x.Cursor(w1); c != tc.cursor {
				t.Errorf("cursor %d, want %d", c, tc.cursor)
			}
			if p := x.Stats().Pairs; p != tc.pairs {
				t.Errorf("pairs %d, want %d", p, tc.pairs)
			}
			checkInvariants(t, x)
		})
	}
}

func TestExactStatsCounters(t *testing.T) {
	x := NewExact()
	evs := []routing.Event{
		stored(w1, 1, dev, blk(10, 1)),
		removed(w1, 2, dev, 77, 78),
		child(w1, 3, dev, 99, blk(11, 2)),
		stored(w1, 3, dev, blk(12, 2)),
		stored(w1, 9, dev, blk(12, 2)),
		stored(w1, 1, dev, blk(12, 2)),
	}
	for i := range evs {
		_ = x.Apply(&evs[i])
	}
	got := x.Stats()
	want := ExactStats{Blocks: 1, Pairs: 1, Workers: 1, UnknownRemovals: 2, UnknownParents: 1, Stale: 1, Gaps: 1, Restarts: 1}
	if got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

func TestExactReplaceAndRemove(t *testing.T) {
	x := NewExact()
	for _, ev := range []routing.Event{
		stored(w1, 1, dev, blk(10, 1), blk(11, 2)),
		stored(w2, 1, dev, blk(50, 1)),
		stored(w3, 1, dev, blk(60, 1)),
	} {
		if err := x.Apply(&ev); err != nil {
			t.Fatal(err)
		}
	}
	snap := []routing.Event{
		stored(w1, 0, dev, blk(20, 1)),
		child(w1, 0, host, 20, blk(21, 2)),
		child(w1, 0, dev, 404, blk(22, 3)),
	}
	if err := x.ReplaceWorker(w1, snap, 41); !errors.Is(err, ErrUnknownParent) {
		t.Fatalf("replace: %v, want ErrUnknownParent for the orphan", err)
	}
	if c, _ := x.Cursor(w1); c != 41 {
		t.Errorf("cursor %d, want 41", c)
	}
	want := []routing.Match{match(w1, 1, 1, 0), match(w2, 1, 0, 0), match(w3, 1, 0, 0)}
	if got := x.FindMatches(seqs(1, 2, 3), nil); !slices.Equal(got, want) {
		t.Errorf("after replace %v, want %v", got, want)
	}
	bad := []routing.Event{stored(w2, 0, dev, blk(1, 1))}
	if err := x.ReplaceWorker(w1, bad, 50); !errors.Is(err, routing.ErrBadEvent) {
		t.Errorf("replace with foreign worker: %v", err)
	}
	if c, _ := x.Cursor(w1); c != 41 {
		t.Errorf("rejected replace changed the cursor to %d", c)
	}
	if n := x.RemoveEngine(2); n != 2 {
		t.Errorf("RemoveEngine removed %d ranks, want 2", n)
	}
	if !x.RemoveWorker(w1) || x.RemoveWorker(w1) {
		t.Error("RemoveWorker must report true once")
	}
	if got := x.FindMatches(seqs(1), nil); len(got) != 0 {
		t.Errorf("after removals %v", got)
	}
	if s := x.Stats(); s.Pairs != 0 || s.Blocks != 0 || s.Workers != 0 {
		t.Errorf("stats after removals %+v", s)
	}
	if _, ok := x.Cursor(w2); ok {
		t.Error("removed worker still has a cursor")
	}
	checkInvariants(t, x)
}
