package consensus

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

const t0 = int64(1_700_000_000_000_000_000)

func bindCmd(key string, worker uint64, expect uint64, stamped int64, req string) *kvrpb.RaftBindSession {
	return &kvrpb.RaftBindSession{Key: key, WorkerId: worker, ExpectVersion: expect, StampedUnixNanos: stamped,
		IdleTtlNanos: int64(time.Minute), MaxSessions: 100, RequestId: req, Dc: "dc1"}
}

func TestBindCompareAndSet(t *testing.T) {
	f := NewFSM(nil, nil, nil)
	tests := []struct {
		name    string
		cmd     *kvrpb.RaftBindSession
		code    Code
		won     bool
		version uint64
	}{
		{"first bind wins", bindCmd("s", 1, 0, t0, ""), CodeOK, true, 1},
		{"second new bind loses to the first", bindCmd("s", 2, 0, t0, ""), CodeConflict, false, 1},
		{"stale expect loses", bindCmd("s", 2, 7, t0, ""), CodeConflict, false, 1},
		{"matching expect moves the binding", bindCmd("s", 3, 1, t0, ""), CodeOK, true, 4},
		{"expired binding binds afresh", bindCmd("s", 5, 0, t0+int64(2*time.Minute), ""), CodeOK, true, 5},
		{"empty key is invalid", bindCmd("", 1, 0, t0, ""), CodeInvalid, false, 0},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, _ := encodeTyped(TypeBindSession, tc.cmd)
			r, err := unwrapResponse(f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: data}))
			if err != nil {
				t.Fatal(err)
			}
			if Code(r.Code) != tc.code || r.Won != tc.won || r.GetBinding().GetVersion() != tc.version {
				t.Fatalf("got code %v won %v version %d, want %v %v %d", Code(r.Code), r.Won, r.GetBinding().GetVersion(), tc.code, tc.won, tc.version)
			}
		})
	}
}

func TestBindRequestIDIsIdempotent(t *testing.T) {
	f := NewFSM(nil, nil, nil)
	first := applyAt(t, f, 1, bindCmd("s", 1, 0, t0, "req-1"))
	again := applyAt(t, f, 2, bindCmd("s", 1, 0, t0, "req-1"))
	if !first.Won || !again.Won || again.Binding.Version != first.Binding.Version {
		t.Fatalf("retry got %v, first %v", again, first)
	}
	other := applyAt(t, f, 3, bindCmd("s", 1, 0, t0, "req-2"))
	if other.Won || Code(other.Code) != CodeConflict {
		t.Fatalf("a new request id must be judged afresh, got %v", other)
	}
}

func TestRememberedRequestsAreBounded(t *testing.T) {
	f := NewFSM(nil, nil, nil)
	for i := range RememberedRequests + 10 {
		applyAt(t, f, uint64(i+1), &kvrpb.RaftUnbindSession{Key: "k", RequestId: string(rune('a'+i%26)) + string(rune(i))})
	}
	n := 0
	f.st.Requests(func(string, *kvrpb.RaftResult) bool { n++; return true })
	if n != RememberedRequests {
		t.Fatalf("remembered %d ids, want %d", n, RememberedRequests)
	}
}

func TestSessionLimit(t *testing.T) {
	f := NewFSM(nil, nil, nil)
	c := bindCmd("a", 1, 0, t0, "")
	c.MaxSessions = 1
	applyAt(t, f, 1, c)
	c2 := bindCmd("b", 1, 0, t0, "")
	c2.MaxSessions = 1
	if r := applyAt(t, f, 2, c2); Code(r.Code) != CodeSessionLimit {
		t.Fatalf("got %v, want session_limit", Code(r.Code))
	}
}

// TestExpiryIsDeterministic replays the same entries on two FSMs: the
// stamped time alone decides what expires.
func TestExpiryIsDeterministic(t *testing.T) {
	entries := []*kvrpb.RaftExpireSessions{
		{Sessions: []*kvrpb.RaftSessionRef{{Key: "a", Version: 1}, {Key: "b", Version: 2}}, StampedUnixNanos: t0 + int64(30*time.Second)},
		{Sessions: []*kvrpb.RaftSessionRef{{Key: "a", Version: 1}, {Key: "b", Version: 2}}, StampedUnixNanos: t0 + int64(61*time.Second)},
	}
	var counts [2][]uint64
	var hashes [2]uint64
	for k := range 2 {
		f := NewFSM(nil, nil, nil)
		applyAt(t, f, 1, bindCmd("a", 1, 0, t0, ""))
		applyAt(t, f, 2, bindCmd("b", 1, 0, t0+int64(10*time.Second), ""))
		for i, e := range entries {
			counts[k] = append(counts[k], applyAt(t, f, uint64(3+i), e).Count)
		}
		_, hashes[k] = f.StateHash()
		if _, ok := f.Session("b"); !ok {
			t.Fatal("b expired before its deadline")
		}
	}
	if counts[0][0] != 0 || counts[0][1] != 1 || counts[0][1] != counts[1][1] || hashes[0] != hashes[1] {
		t.Fatalf("counts %v, hashes %x", counts, hashes)
	}
}

func TestKeepAliveExtendsAndReleases(t *testing.T) {
	f := NewFSM(nil, nil, nil)
	applyAt(t, f, 1, bindCmd("s", 1, 0, t0, ""))
	ttl := int64(time.Minute)
	refs := []*kvrpb.RaftSessionRef{{Key: "s", Version: 1}, {Key: "gone", Version: 9}}
	r := applyAt(t, f, 2, &kvrpb.RaftTouchSessions{Sessions: refs, StampedUnixNanos: t0 + int64(50*time.Second), IdleTtlNanos: ttl})
	b, _ := f.Session("s")
	if r.Count != 1 || b.IdleDeadlineUnixNanos != t0+int64(110*time.Second) || !b.Active {
		t.Fatalf("touch: count %d binding %v", r.Count, b)
	}
	applyAt(t, f, 3, &kvrpb.RaftReleaseSessions{Sessions: refs[:1], StampedUnixNanos: t0 + int64(60*time.Second), IdleTtlNanos: ttl})
	b, _ = f.Session("s")
	if b.Active || b.IdleDeadlineUnixNanos != t0+int64(120*time.Second) {
		t.Fatalf("release: %v", b)
	}
}

func TestUnbindAndInvalidateEngine(t *testing.T) {
	f := NewFSM(nil, nil, nil)
	applyAt(t, f, 1, bindCmd("a", 1, 0, t0, ""))
	applyAt(t, f, 2, bindCmd("b", 1, 0, t0, ""))
	applyAt(t, f, 3, bindCmd("c", 2, 0, t0, ""))
	if r := applyAt(t, f, 4, &kvrpb.RaftUnbindSession{Key: "c", Version: 99}); r.Count != 0 {
		t.Fatal("unbind at a wrong version dropped the binding")
	}
	if r := applyAt(t, f, 5, &kvrpb.RaftInvalidateEngine{WorkerId: 1}); r.Count != 2 {
		t.Fatalf("invalidate engine dropped %d, want 2", r.Count)
	}
	if r := applyAt(t, f, 6, &kvrpb.RaftUnbindSession{Key: "c"}); r.Count != 1 || f.NumSessions() != 0 {
		t.Fatalf("unbind any version: %v, %d left", r, f.NumSessions())
	}
}

func TestUndecodableEntryHalts(t *testing.T) {
	f := NewFSM(nil, nil, nil)
	tests := []struct {
		name string
		data []byte
		halt bool
	}{
		{"unknown ignorable command is skipped", []byte{byte(IgnoreIfUnknown | 0x55), 1, 0xff}, false},
		{"unknown command halts", []byte{0x55, 1}, true},
		{"later entries are refused", []byte{byte(TypeUnbindSession), 1}, true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: tc.data})
			err, isErr := v.(error)
			if isErr != tc.halt || tc.halt && !errors.Is(err, ErrHalted) {
				t.Fatalf("got %v", v)
			}
			if !tc.halt && Code(v.(*kvrpb.RaftResult).Code) != CodeIgnored {
				t.Fatalf("got %v", v)
			}
		})
	}
	if f.Halted() == nil {
		t.Fatal("Halted() is nil after an undecodable entry")
	}
}

func TestEncodeRejects(t *testing.T) {
	cases := []struct {
		name string
		err  error
		run  func() error
	}{
		{"nil", ErrBadCommand, func() error { _, err := Encode(nil); return err }},
		{"not a command", ErrBadCommand, func() error { _, err := Encode(&kvrpb.RaftBinding{}); return err }},
		{"bind without ttl", ErrBadCommand, func() error { _, err := Encode(&kvrpb.RaftBindSession{Key: "k", MaxSessions: 1}); return err }},
		{"kv events empty", ErrBadCommand, func() error { _, err := Encode(&kvrpb.RaftKVEvents{}); return err }},
		{"worker without card", ErrBadCommand, func() error { _, err := Encode(&kvrpb.RaftRegisterWorker{}); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
		})
	}
}

// kvBatch builds a batch of kvEvents.
func kvBatch(w routing.Worker, firstID uint64, events int, salt uint64) *kvrpb.KVEventBatch {
	return wire.EncodeBatch(w, 1, kvEvents(w, firstID, events, salt))
}

// kvEvents builds a run of stored events: one chain of 4 blocks per event.
func kvEvents(w routing.Worker, firstID uint64, events int, salt uint64) []routing.Event {
	var evs []routing.Event
	for e := range events {
		ev := routing.Event{Worker: w, ID: firstID + uint64(e), Kind: routing.EventStored, Tier: routing.TierDevice}
		for b := range uint64(4) {
			ev.Blocks = append(ev.Blocks, routing.StoredBlock{
				Engine: routing.EngineHash(salt<<32 | uint64(e)<<8 | b), Local: routing.LocalHash(salt*1000 + uint64(e)*10 + b)})
		}
		evs = append(evs, ev)
	}
	return evs
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct{ bytes.Buffer }

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { return nil }
func (s *memSink) Close() error  { return nil }

// snapshotRoundTrip persists f and restores the stream into a new FSM.
func snapshotRoundTrip(t *testing.T, f *FSM) *FSM {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	g := NewFSM(nil, nil, nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestSnapshotRoundTripEveryTable(t *testing.T) {
	card := &kvrpb.WorkerCard{EngineId: 7, DpSize: 2, Model: "m", BlockSize: 16, TotalKvBlocks: 100,
		MaxNumBatchedTokens: 8192, Checksum: "c", EndpointUrl: "http://e:8000"}
	w := routing.Worker{ID: 7, Rank: 1}
	tests := []struct {
		name  string
		fill  func(t *testing.T, f *FSM)
		check func(t *testing.T, g *FSM)
	}{
		{"sessions", func(t *testing.T, f *FSM) { applyAt(t, f, 1, bindCmd("s", 7, 0, t0, "")) },
			func(t *testing.T, g *FSM) {
				if b, ok := g.Session("s"); !ok || b.WorkerId != 7 || b.Version != 1 {
					t.Fatalf("session %v", b)
				}
			}},
		{"workers", func(t *testing.T, f *FSM) { applyAt(t, f, 1, &kvrpb.RaftRegisterWorker{Card: card, Dc: "dc1"}) },
			func(t *testing.T, g *FSM) {
				if r, ok := g.Worker(7); !ok || r.Card.Model != "m" || r.Dc != "dc1" {
					t.Fatalf("worker %v", r)
				}
			}},
		{"cursors and ownership", func(t *testing.T, f *FSM) {
			applyAt(t, f, 1, &kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{kvBatch(w, 1, 3, 1)}})
		}, func(t *testing.T, g *FSM) {
			if c, _ := g.Cursor(w); c != 3 {
				t.Fatalf("cursor %d", c)
			}
			hs := []routing.SeqHash{routing.SeqHash(1000), routing.Chain(1000, 1001)}
			m := g.Index().FindMatches(hs, nil)
			if len(m) != 1 || m[0].Worker != w || m[0].Device != 2 {
				t.Fatalf("index matches %v", m)
			}
		}},
		{"request ids", func(t *testing.T, f *FSM) { applyAt(t, f, 1, bindCmd("s", 7, 0, t0, "r1")) },
			func(t *testing.T, g *FSM) {
				r := applyAt(t, g, 2, bindCmd("s", 7, 0, t0, "r1"))
				if !r.Won || r.Binding.Version != 1 {
					t.Fatalf("restored request id not recalled: %v", r)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFSM(nil, nil, nil)
			tc.fill(t, f)
			g := snapshotRoundTrip(t, f)
			ai, ah := f.StateHash()
			bi, bh := g.StateHash()
			if ai != bi || ah != bh {
				t.Fatalf("restored (%d, %x), want (%d, %x)", bi, bh, ai, ah)
			}
			tc.check(t, g)
		})
	}
}

func TestRestoreRejectsCorruptSnapshot(t *testing.T) {
	f := NewFSM(nil, nil, nil)
	applyAt(t, f, 1, bindCmd("s", 7, 0, t0, ""))
	snap, _ := f.Snapshot()
	var sink memSink
	_ = snap.Persist(&sink)
	b := sink.Bytes()
	b[len(b)/2] ^= 0xff
	g := NewFSM(nil, nil, nil)
	applyAt(t, g, 1, bindCmd("keep", 1, 0, t0, ""))
	if err := g.Restore(io.NopCloser(bytes.NewReader(b))); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("got %v", err)
	}
	if _, ok := g.Session("keep"); !ok {
		t.Fatal("a failed restore changed the state")
	}
}

func TestKVEventsMirrorIndex(t *testing.T) {
	f := NewFSM(nil, nil, nil)
	w := routing.Worker{ID: 3}
	applyAt(t, f, 1, &kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{kvBatch(w, 1, 2, 5)}})
	// A gap changes nothing; a duplicate changes nothing.
	r := applyAt(t, f, 2, &kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{kvBatch(w, 5, 1, 6), kvBatch(w, 2, 1, 7)}})
	if r.Count != 0 {
		t.Fatalf("applied %d events of a gap and a duplicate", r.Count)
	}
	rm := wire.EncodeBatch(w, 1, []routing.Event{{Worker: w, ID: 3, Kind: routing.EventRemoved, Tier: routing.TierDevice,
		Removed: []routing.EngineHash{routing.EngineHash(5<<32 | 0<<8 | 1)}}})
	applyAt(t, f, 3, &kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{rm}})
	g := snapshotRoundTrip(t, f)
	hs := []routing.SeqHash{5000, routing.Chain(5000, 5001), routing.Chain(routing.Chain(5000, 5001), 5002)}
	a, b := f.Index().FindMatches(hs, nil), g.Index().FindMatches(hs, nil)
	if len(a) != 1 || a[0].Device != 1 || len(b) != 1 || b[0] != a[0] {
		t.Fatalf("live index %v, restored index %v", a, b)
	}
	if sa, sb := f.Index().Stats(), g.Index().Stats(); sa.Pairs != sb.Pairs || sa.Blocks != sb.Blocks {
		t.Fatalf("index stats %+v vs %+v", sa, sb)
	}
}
