package consensus

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
	"github.com/kvrouter/kvrouter/store"
)

// openStoreFSM opens the FSM store in dir on fs and an FSM over it; the
// returned function closes the store.
func openStoreFSM(t testing.TB, fs vfs.FS, dir string) (*FSM, *StoreState, func()) {
	t.Helper()
	s, err := store.OpenFSM(store.Options{Dir: dir, FS: fs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	st, err := OpenStoreState(s)
	if err != nil {
		_ = s.Close()
		t.Fatal(err)
	}
	closed := false
	done := func() {
		if !closed {
			closed = true
			st.Close()
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(done)
	return NewFSM(st, nil, nil), st, done
}

// eventsCmd wraps events of one rank in a KV-events command.
func eventsCmd(w routing.Worker, evs ...routing.Event) *kvrpb.RaftKVEvents {
	return &kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{wire.EncodeBatch(w, 1, evs)}}
}

// fillEveryTable applies commands touching every table from index 1 on
// and returns the next free index.
func fillEveryTable(t *testing.T, f *FSM) uint64 {
	t.Helper()
	card := &kvrpb.WorkerCard{EngineId: 7, DpSize: 2, Model: "m", BlockSize: 16, TotalKvBlocks: 100,
		MaxNumBatchedTokens: 8192, Checksum: "c", EndpointUrl: "http://e:8000"}
	w, v := routing.Worker{ID: 7, Rank: 1}, routing.Worker{ID: 8, Rank: 0}
	cmds := []proto.Message{
		&kvrpb.RaftRegisterWorker{Card: card, Dc: "dc1"},
		bindCmd("a", 7, 0, t0, "r1"),
		bindCmd("b", 7, 0, t0, "r2"),
		bindCmd("c", 8, 0, t0, ""),
		&kvrpb.RaftUnbindSession{Key: "c"},
		&kvrpb.RaftTouchSessions{Sessions: []*kvrpb.RaftSessionRef{{Key: "a", Version: 2}},
			StampedUnixNanos: t0 + int64(time.Second), IdleTtlNanos: int64(time.Minute)},
		&kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{kvBatch(w, 1, 3, 1), kvBatch(v, 1, 2, 2)}},
		eventsCmd(w, routing.Event{Worker: w, ID: 4, Kind: routing.EventRemoved, Tier: routing.TierDevice,
			Removed: []routing.EngineHash{routing.EngineHash(1<<32 | 0<<8 | 3)}}),
		eventsCmd(v, routing.Event{Worker: v, ID: 3, Kind: routing.EventCleared}),
		replaceCmd(v, true, true, 9, storedEvent(v, 0, 50, 3)),
	}
	for i, m := range cmds {
		applyAt(t, f, uint64(i+1), m)
	}
	return uint64(len(cmds) + 1)
}

// tables returns the canonical records of every table of f.
func tables(f *FSM) []*kvrpb.RaftSnapshotRecord {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.records()
}

// sameTables fails t unless a and b hold equal tables and hashes.
func sameTables(t *testing.T, got, want *FSM) {
	t.Helper()
	gi, gh := got.StateHash()
	wi, wh := want.StateHash()
	if gi != wi || gh != wh {
		t.Fatalf("state (%d, %x), want (%d, %x)", gi, gh, wi, wh)
	}
	g, w := tables(got), tables(want)
	if !slices.EqualFunc(g, w, func(a, b *kvrpb.RaftSnapshotRecord) bool { return proto.Equal(a, b) }) {
		t.Fatalf("tables differ:\n got %v\nwant %v", g, w)
	}
}

func TestStoreStateSurvivesReopen(t *testing.T) {
	fs := vfs.NewMem()
	f, _, done := openStoreFSM(t, fs, "fsm")
	next := fillEveryTable(t, f)
	ref := NewFSM(nil, nil, nil)
	fillEveryTable(t, ref)
	sameTables(t, f, ref)
	done()

	g, st, _ := openStoreFSM(t, fs, "fsm")
	if st.Applied() != next-1 || g.AppliedIndex() != next-1 {
		t.Fatalf("applied %d / %d, want %d", st.Applied(), g.AppliedIndex(), next-1)
	}
	sameTables(t, g, ref)
	hs := []routing.SeqHash{routing.SeqHash(1000), routing.Chain(1000, 1001)}
	if got, want := g.Index().FindMatches(hs, nil), ref.Index().FindMatches(hs, nil); !slices.Equal(got, want) || len(got) == 0 {
		t.Fatalf("rebuilt index matches %v, want %v", got, want)
	}
	if r := applyAt(t, g, 2, bindCmd("a", 9, 0, t0, "r1")); r.Code != uint32(CodeIgnored) {
		t.Fatalf("replayed entry applied again: %v", r)
	}
	sameTables(t, g, ref)
	if r := applyAt(t, g, next, bindCmd("z", 9, 0, t0, "r1")); !r.Won || r.Binding.Key != "a" {
		t.Fatalf("request id not recalled after reopen: %v", r)
	}
}

func TestStoreStateBatchCommitsOnce(t *testing.T) {
	fs := vfs.NewMem()
	f, st, done := openStoreFSM(t, fs, "fsm")
	var logs []*raft.Log
	for i := range 5 {
		data, err := Encode(bindCmd(string(rune('a'+i)), 1, 0, t0, ""))
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, &raft.Log{Index: uint64(i + 1), Term: 3, Type: raft.LogCommand, Data: data})
	}
	f.ApplyBatch(logs)
	if st.Applied() != 5 || st.Err() != nil {
		t.Fatalf("applied %d, err %v", st.Applied(), st.Err())
	}
	done()
	g, _, _ := openStoreFSM(t, fs, "fsm")
	sameTables(t, g, f)
}

func TestStoreStateRequestFIFOEvicts(t *testing.T) {
	fs := vfs.NewMem()
	f, _, done := openStoreFSM(t, fs, "fsm")
	var logs []*raft.Log
	for i := range RememberedRequests + 10 {
		data, err := Encode(bindCmd("s", 1, 0, t0, "req-"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data})
	}
	f.ApplyBatch(logs)
	done()
	g, st, _ := openStoreFSM(t, fs, "fsm")
	sameTables(t, g, f)
	if _, ok := st.Request("req-0"); ok {
		t.Fatal("the oldest request survived eviction")
	}
}

func TestStoreStateRestoreReplacesStore(t *testing.T) {
	fs := vfs.NewMem()
	f, _, done := openStoreFSM(t, fs, "fsm")
	fillEveryTable(t, f)

	src := NewFSM(nil, nil, nil)
	applyAt(t, src, 1, bindCmd("other", 3, 0, t0, "rx"))
	for i := uint64(2); i <= 20; i++ {
		applyAt(t, src, i, &kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{kvBatch(routing.Worker{ID: 3}, i, 1, i)}})
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	sameTables(t, f, src)
	done()
	g, st, _ := openStoreFSM(t, fs, "fsm")
	if st.Applied() != 20 {
		t.Fatalf("applied %d after restore, want 20", st.Applied())
	}
	sameTables(t, g, src)

	old := NewFSM(nil, nil, nil)
	applyAt(t, old, 1, bindCmd("x", 1, 0, t0, ""))
	snap, _ = old.Snapshot()
	sink.Reset()
	_ = snap.Persist(&sink)
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("restore behind the durable index: %v", err)
	}
	sameTables(t, g, src)
}

func TestRestoreNewerSnapshotOnOpen(t *testing.T) {
	src := NewFSM(nil, nil, nil)
	for i := uint64(1); i <= 10; i++ {
		applyAt(t, src, i, bindCmd("k"+strconv.Itoa(int(i)), i, 0, t0, ""))
	}
	snaps := raft.NewInmemSnapshotStore()
	sink, err := snaps.Create(raft.SnapshotVersionMax, 10, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		applied uint64
		want    func() *FSM
	}{
		{"durable state behind the snapshot restores it", 3, func() *FSM { return src }},
		{"durable state ahead of the snapshot keeps its own", 12, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, _, _ := openStoreFSM(t, vfs.NewMem(), "fsm")
			for i := uint64(1); i <= tc.applied; i++ {
				applyAt(t, f, i, bindCmd("own"+strconv.Itoa(int(i)), i, 0, t0, ""))
			}
			ref := NewFSM(nil, nil, nil)
			for i := uint64(1); i <= tc.applied; i++ {
				applyAt(t, ref, i, bindCmd("own"+strconv.Itoa(int(i)), i, 0, t0, ""))
			}
			if tc.want != nil {
				ref = tc.want()
			}
			if err := f.restoreNewer(snaps); err != nil {
				t.Fatal(err)
			}
			sameTables(t, f, ref)
		})
	}
}

func TestStoreStateStopsAtFirstStoreError(t *testing.T) {
	fs := vfs.NewMem()
	f, st, done := openStoreFSM(t, fs, "fsm")
	applyAt(t, f, 1, bindCmd("good", 1, 0, t0, ""))
	// Every bound the store enforces is checked by the commands'
	// validation, so a closed store stands in for a refused write.
	if err := st.s.Close(); err != nil {
		t.Fatal(err)
	}
	applyAt(t, f, 2, bindCmd("bad", 1, 0, t0, ""))
	applyAt(t, f, 3, bindCmd("later", 1, 0, t0, ""))
	if st.Err() == nil || st.Applied() != 1 {
		t.Fatalf("err %v, applied %d; want an error at applied 1", st.Err(), st.Applied())
	}
	if _, ok := f.Session("later"); !ok {
		t.Fatal("the in-memory tables stopped with the store")
	}
	done()
	g, st2, _ := openStoreFSM(t, fs, "fsm")
	if st2.Applied() != 1 || g.NumSessions() != 1 {
		t.Fatalf("reopened at %d with %d sessions, want 1 and 1", st2.Applied(), g.NumSessions())
	}
}

func TestRestoreNewerIgnoresSnapshotOfNoNewEntries(t *testing.T) {
	f, st, _ := openStoreFSM(t, vfs.NewMem(), "fsm")
	applyAt(t, f, 1, bindCmd("a", 1, 0, t0, ""))
	snaps := raft.NewInmemSnapshotStore()
	// Raft's index 3 covers two entries the FSM never saw.
	sink, err := snaps.Create(raft.SnapshotVersionMax, 3, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := f.Snapshot()
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if err := f.restoreNewer(snaps); err != nil || st.Applied() != 1 {
		t.Fatalf("restoreNewer: %v, applied %d", err, st.Applied())
	}
	if _, ok := f.Session("a"); !ok {
		t.Fatal("tables lost")
	}
}
