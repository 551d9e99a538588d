package consensus

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// TestIndexErrorCountedAndRankRebuilt makes the exact index disagree
// with the FSM's tables, applies an event whose outcome then differs,
// and checks that the FSM counts the index error and rebuilds the rank's
// index from its tables.
func TestIndexErrorCountedAndRankRebuilt(t *testing.T) {
	w := routing.Worker{ID: 3, Rank: 1}
	root := storedEvent(w, 1, 7, 2)
	child := storedEvent(w, 2, 8, 2)
	child.Parent, child.HasParent = root.Blocks[1].Engine, true
	rootSeqs := chainHashes(root)
	stray := storedEvent(w, 0, 9, 1)
	orphan := storedEvent(w, 2, 10, 1)
	orphan.Parent, orphan.HasParent = stray.Blocks[0].Engine, true
	cases := []struct {
		name string
		// diverge changes the index behind the FSM's back.
		diverge func(f *FSM)
		next    routing.Event
		// want is the device depth of the rank on root's chain afterwards.
		want int
	}{
		{"index lost the rank", func(f *FSM) { f.Index().RemoveWorker(w) }, child, 2},
		{"index holds a parent the tables lack", func(f *FSM) {
			_ = f.Index().ReplaceWorker(w, []routing.Event{root, stray}, 1)
		}, orphan, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFSM(nil, nil, nil)
			f.metrics = metrics.New()
			applyAt(t, f, 1, kvEntry(root))
			tc.diverge(f)
			applyAt(t, f, 2, kvEntry(tc.next))
			if got := testutil.ToFloat64(f.metrics.RaftIndexErrors); got != 1 {
				t.Fatalf("index errors %v, want 1", got)
			}
			if got := deviceMatch(f, w, rootSeqs); got != tc.want {
				t.Fatalf("rebuilt index matches %d blocks of root, want %d", got, tc.want)
			}
			if cur, _ := f.Index().Cursor(w); cur != 2 {
				t.Fatalf("index cursor %d, want the tables' 2", cur)
			}
			if got := deviceMatch(f, w, []routing.SeqHash{routing.SeqHash(stray.Blocks[0].Local)}); got != 0 {
				t.Fatal("the rebuilt index kept a block the tables lack")
			}
			// A rebuilt index agrees again: the next event counts nothing.
			applyAt(t, f, 3, kvEntry(storedEvent(w, 3, 11, 1)))
			if got := testutil.ToFloat64(f.metrics.RaftIndexErrors); got != 1 {
				t.Fatalf("index errors %v after the rebuild, want 1", got)
			}
		})
	}
}

// kvEntry is a KV-events command of one event.
func kvEntry(ev routing.Event) *kvrpb.RaftKVEvents {
	return &kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{wire.EncodeBatch(ev.Worker, 1, []routing.Event{ev})}}
}
