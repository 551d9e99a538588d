package consensus

import (
	"errors"
	"maps"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// ownModel is ownership rebuilt from a snapshot and batches, with the
// producer's semantics.
type ownModel map[routing.Worker]map[routing.SeqHash]struct{}

// modelOf loads a snapshot.
func modelOf(s OwnershipSnapshot) ownModel {
	m := ownModel{}
	for _, r := range s.Ranks {
		for _, h := range r.Hashes {
			m.add(r.Worker, h)
		}
	}
	return m
}

func (m ownModel) add(w routing.Worker, h routing.SeqHash) bool {
	if m[w] == nil {
		m[w] = map[routing.SeqHash]struct{}{}
	}
	_, had := m[w][h]
	m[w][h] = struct{}{}
	return !had
}

// apply applies a batch and returns the number of stored or removed
// hashes that did not change the model (the FSM only records real
// transitions, so it must be 0).
func (m ownModel) apply(b OwnershipBatch) (noops int) {
	for _, c := range b.Changes {
		switch c.Kind {
		case routing.ChangeStored:
			for _, h := range c.Hashes {
				if !m.add(c.Worker, h) {
					noops++
				}
			}
		case routing.ChangeRemoved:
			for _, h := range c.Hashes {
				if _, ok := m[c.Worker][h]; !ok {
					noops++
				}
				delete(m[c.Worker], h)
			}
		case routing.ChangeRankCleared:
			delete(m, c.Worker)
		case routing.ChangeWorkerRemoved:
			maps.DeleteFunc(m, func(w routing.Worker, _ map[routing.SeqHash]struct{}) bool { return w.ID == c.Worker.ID })
		}
	}
	return noops
}

// equal compares two models, ignoring empty ranks.
func (m ownModel) equal(o ownModel) bool {
	count := func(x ownModel) int {
		n := 0
		for _, s := range x {
			n += len(s)
		}
		return n
	}
	if count(m) != count(o) {
		return false
	}
	for w, s := range m {
		for h := range s {
			if _, ok := o[w][h]; !ok {
				return false
			}
		}
	}
	return true
}

// genEntry draws one command that touches ownership: a KV-events entry of
// one rank (stored with or without a parent, removed, cleared, a restart
// at id 1), a one-chunk rank replacement, or a worker removal. Engine and
// local hashes come from small domains so that ids get reused and blocks
// shared.
func genEntry(t *rapid.T, next map[routing.Worker]uint64) proto.Message {
	w := routing.Worker{ID: routing.WorkerID(rapid.Uint64Range(1, 3).Draw(t, "id")), Rank: rapid.Uint32Range(0, 1).Draw(t, "rank")}
	switch rapid.IntRange(0, 9).Draw(t, "cmd") {
	case 0:
		delete(next, w)
		return &kvrpb.RaftRemoveWorker{EngineId: uint64(w.ID)}
	case 1:
		ev := genStored(t, w, 0)
		return &kvrpb.RaftReplaceRank{EngineId: uint64(w.ID), Rank: w.Rank, First: true, Last: true, Cursor: 5,
			Events: []*kvrpb.KVEvent{wire.EncodeEvent(&ev)}}
	}
	id := next[w] + 1
	if rapid.IntRange(0, 15).Draw(t, "restart") == 0 {
		id = 1
	}
	next[w] = id
	var ev routing.Event
	switch rapid.IntRange(0, 5).Draw(t, "kind") {
	case 0:
		ev = routing.Event{Worker: w, ID: id, Kind: routing.EventCleared}
	case 1, 2:
		ev = routing.Event{Worker: w, ID: id, Kind: routing.EventRemoved, Tier: genTier(t),
			Removed: []routing.EngineHash{routing.EngineHash(rapid.Uint64Range(1, 12).Draw(t, "rm"))}}
	default:
		ev = genStored(t, w, id)
	}
	return &kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{wire.EncodeBatch(w, 1, []routing.Event{ev})}}
}

func genTier(t *rapid.T) routing.Tier {
	return routing.Tier(rapid.IntRange(0, int(routing.NumTiers)-1).Draw(t, "tier"))
}

// genStored draws a stored event of 1-3 blocks, with a parent half the
// time.
func genStored(t *rapid.T, w routing.Worker, id uint64) routing.Event {
	ev := routing.Event{Worker: w, ID: id, Kind: routing.EventStored, Tier: genTier(t)}
	if rapid.Bool().Draw(t, "parent") {
		ev.HasParent, ev.Parent = true, routing.EngineHash(rapid.Uint64Range(1, 12).Draw(t, "p"))
	}
	for range rapid.IntRange(1, 3).Draw(t, "n") {
		ev.Blocks = append(ev.Blocks, routing.StoredBlock{
			Engine: routing.EngineHash(rapid.Uint64Range(1, 12).Draw(t, "eh")),
			Local:  routing.LocalHash(rapid.Uint64Range(1, 6).Draw(t, "lh")),
		})
	}
	return ev
}

// TestOwnershipStreamMatchesTables checks that, for any command sequence,
// the batches replayed on empty ownership give the FSM's tables, that a
// snapshot taken midway plus the later batches give them too, that every
// stored or removed hash is a real transition, and that the Prev chain has
// no gap.
func TestOwnershipStreamMatchesTables(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := NewFSM(nil, nil, nil)
		next := map[routing.Worker]uint64{}
		n := rapid.IntRange(1, 60).Draw(t, "entries")
		cut := rapid.IntRange(0, n).Draw(t, "cut")
		var mid OwnershipSnapshot
		for i := range n {
			if i == cut {
				mid = f.OwnershipSnapshot()
			}
			applyRapid(t, f, uint64(i+1), genEntry(t, next))
		}
		if cut == n {
			mid = f.OwnershipSnapshot()
		}
		bs, err := f.Ownership().Since(0, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		full, fromMid, prev := ownModel{}, modelOf(mid), uint64(0)
		for _, b := range bs {
			if b.Prev != prev {
				t.Fatalf("batch %d: prev %d, want %d", b.Index, b.Prev, prev)
			}
			prev = b.Index
			if noops := full.apply(b); noops != 0 {
				t.Fatalf("batch %d: %d stored/removed hashes that changed nothing", b.Index, noops)
			}
			if b.Index > mid.Index {
				fromMid.apply(b)
			}
		}
		want := modelOf(f.OwnershipSnapshot())
		if !full.equal(want) {
			t.Fatalf("batches from empty: %v, tables: %v", full, want)
		}
		if !fromMid.equal(want) {
			t.Fatalf("snapshot at %d plus later batches: %v, tables: %v", mid.Index, fromMid, want)
		}
	})
}

// TestOwnershipSnapshotFallback checks that the State-interface path of
// OwnershipSnapshot lists the same rows as MemState's direct one.
func TestOwnershipSnapshotFallback(t *testing.T) {
	f := NewFSM(nil, nil, nil)
	for i := range 4 {
		w := routing.Worker{ID: routing.WorkerID(i%2 + 1), Rank: uint32(i / 2)}
		applyAt(t, f, uint64(i+1), &kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{kvBatch(w, 1, 3, uint64(i))}})
	}
	snap := f.OwnershipSnapshot()
	if snap.Rows() != 4*3*4 {
		t.Fatalf("%d rows, want 48", snap.Rows())
	}
	f.mu.RLock()
	for _, r := range snap.Ranks {
		if got := f.ownedByBlocks(r.Worker); len(got) != len(r.Hashes) {
			t.Errorf("%v: fallback lists %d hashes, direct %d", r.Worker, len(got), len(r.Hashes))
		}
	}
	f.mu.RUnlock()
}

// TestOwnershipRestoreResets checks that a restore moves the ring's start
// to the snapshot's index, so older positions are overrun.
func TestOwnershipRestoreResets(t *testing.T) {
	f := NewFSM(nil, nil, nil)
	w := routing.Worker{ID: 1}
	applyAt(t, f, 1, &kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{kvBatch(w, 1, 2, 1)}})
	applyAt(t, f, 2, &kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{kvBatch(w, 3, 2, 2)}})
	g := snapshotRoundTrip(t, f)
	if got := g.Ownership().Start(); got != 2 {
		t.Fatalf("restored start %d, want 2", got)
	}
	if _, err := g.Ownership().Since(1, nil, 0); !errors.Is(err, ErrWatchOverrun) {
		t.Fatalf("Since(1) after restore: %v, want ErrWatchOverrun", err)
	}
	if !modelOf(g.OwnershipSnapshot()).equal(modelOf(f.OwnershipSnapshot())) {
		t.Fatal("restored ownership differs")
	}
}

// applyRapid is applyAt for a rapid test.
func applyRapid(t *rapid.T, f *FSM, idx uint64, m proto.Message) {
	data, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unwrapResponse(f.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data})); err != nil {
		t.Fatal(err)
	}
}
