package consensus

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// sh is the stream's hash of a session key.
func sh(keys ...string) []uint64 {
	var out []uint64
	for _, k := range keys {
		out = append(out, kvrpb.SessionKeyHash(k))
	}
	return out
}

// batchAt returns the ring's batch of index, if there is one.
func batchAt(t *testing.T, f *FSM, index uint64) (OwnershipBatch, bool) {
	t.Helper()
	bs, err := f.Ownership().Since(index-1, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) == 0 || bs[0].Index != index {
		return OwnershipBatch{}, false
	}
	return bs[0], true
}

// TestSessionChangesInStream checks every apply path that starts or ends a
// binding, and those that must not report one, entry by entry.
func TestSessionChangesInStream(t *testing.T) {
	expired := t0 + int64(2*time.Minute)
	tests := []struct {
		name             string
		cmd              proto.Message
		bound, unbound   []uint64
		noBatch          bool
		sessionsAfterCmd int
	}{
		{name: "first bind", cmd: bindCmd("a", 1, 0, t0, ""), bound: sh("a"), sessionsAfterCmd: 1},
		{name: "second key", cmd: bindCmd("b", 1, 0, t0, ""), bound: sh("b"), sessionsAfterCmd: 2},
		{name: "third key on another engine", cmd: bindCmd("c", 2, 0, t0, ""), bound: sh("c"), sessionsAfterCmd: 3},
		{name: "lost compare-and-set", cmd: bindCmd("a", 2, 0, t0, ""), noBatch: true, sessionsAfterCmd: 3},
		{name: "compare-and-set move stays bound", cmd: bindCmd("a", 3, 1, t0, ""), noBatch: true, sessionsAfterCmd: 3},
		{name: "keep-alive", cmd: &kvrpb.RaftTouchSessions{Sessions: []*kvrpb.RaftSessionRef{{Key: "b", Version: 2}},
			StampedUnixNanos: t0, IdleTtlNanos: int64(time.Minute)}, noBatch: true, sessionsAfterCmd: 3},
		{name: "rebind of an expired binding stays bound", cmd: bindCmd("c", 2, 0, expired, ""), noBatch: true, sessionsAfterCmd: 3},
		{name: "unbind at a wrong version", cmd: &kvrpb.RaftUnbindSession{Key: "b", Version: 99}, noBatch: true, sessionsAfterCmd: 3},
		{name: "unbind", cmd: &kvrpb.RaftUnbindSession{Key: "b"}, unbound: sh("b"), sessionsAfterCmd: 2},
		{name: "bind again", cmd: bindCmd("b", 1, 0, t0, ""), bound: sh("b"), sessionsAfterCmd: 3},
		{name: "expiry of a live binding is refused", cmd: &kvrpb.RaftExpireSessions{StampedUnixNanos: t0,
			Sessions: []*kvrpb.RaftSessionRef{{Key: "b", Version: 10}}}, noBatch: true, sessionsAfterCmd: 3},
		{name: "expiry", cmd: &kvrpb.RaftExpireSessions{StampedUnixNanos: expired + int64(2*time.Minute),
			Sessions: []*kvrpb.RaftSessionRef{{Key: "b", Version: 10}, {Key: "c", Version: 7}}}, unbound: sh("b", "c"), sessionsAfterCmd: 1},
		{name: "engine invalidation", cmd: &kvrpb.RaftInvalidateEngine{WorkerId: 3}, unbound: sh("a"), sessionsAfterCmd: 0},
	}
	f := NewFSM(nil, nil, nil)
	for i, tc := range tests {
		idx := uint64(i + 1)
		t.Run(tc.name, func(t *testing.T) {
			applyAt(t, f, idx, tc.cmd)
			b, ok := batchAt(t, f, idx)
			if ok == tc.noBatch {
				t.Fatalf("batch at %d: %v (%+v), want batch %v", idx, ok, b, !tc.noBatch)
			}
			if !slices.Equal(b.SessionsBound, tc.bound) || !slices.Equal(b.SessionsUnbound, tc.unbound) || len(b.Changes) != 0 {
				t.Fatalf("batch %+v, want bound %v unbound %v", b, tc.bound, tc.unbound)
			}
			if got := len(f.OwnershipSnapshot().Sessions); got != tc.sessionsAfterCmd || f.NumSessions() != got {
				t.Fatalf("snapshot lists %d sessions, FSM has %d, want %d", got, f.NumSessions(), tc.sessionsAfterCmd)
			}
		})
	}
}

// TestSessionPendingNets checks that a binding started and ended within
// one entry reports nothing, whichever comes first.
func TestSessionPendingNets(t *testing.T) {
	l := newOwnershipLog(0)
	l.sessionBound("x")
	l.sessionUnbound("x")
	l.sessionUnbound("y")
	l.sessionBound("y")
	l.sessionBound("z")
	l.seal(1)
	bs, _ := l.Since(0, nil, 0)
	if len(bs) != 1 || !slices.Equal(bs[0].SessionsBound, sh("z")) || len(bs[0].SessionsUnbound) != 0 {
		t.Fatalf("batches %+v, want one binding z", bs)
	}
	if got := l.Stats().Hashes; got != 1 {
		t.Fatalf("ring counts %d hashes, want 1", got)
	}
}

// sessionSet is the bound-session hashes a watcher rebuilds.
type sessionSet map[uint64]struct{}

// apply applies a batch's session lists and returns how many listed
// hashes changed nothing (a real transition always changes the set).
func (s sessionSet) apply(b OwnershipBatch) (noops int) {
	for _, h := range b.SessionsUnbound {
		if _, ok := s[h]; !ok {
			noops++
		}
		delete(s, h)
	}
	for _, h := range b.SessionsBound {
		if _, ok := s[h]; ok {
			noops++
		}
		s[h] = struct{}{}
	}
	return noops
}

func setOf(hs []uint64) sessionSet {
	s := sessionSet{}
	for _, h := range hs {
		s[h] = struct{}{}
	}
	return s
}

func (s sessionSet) sorted() []uint64 {
	out := make([]uint64, 0, len(s))
	for h := range s {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// genSessionCmd draws a session command over a small key and engine
// domain, with a clock that moves forward so that bindings expire.
func genSessionCmd(t *rapid.T, now *int64) proto.Message {
	key := rapid.SampledFrom([]string{"a", "b", "c", "d"}).Draw(t, "key")
	*now += int64(rapid.IntRange(0, 40).Draw(t, "secs")) * int64(time.Second)
	ver := rapid.Uint64Range(0, 30).Draw(t, "version")
	refs := []*kvrpb.RaftSessionRef{{Key: key, Version: ver}}
	switch rapid.IntRange(0, 5).Draw(t, "cmd") {
	case 0, 1:
		return bindCmd(key, rapid.Uint64Range(1, 2).Draw(t, "engine"), rapid.SampledFrom([]uint64{0, ver}).Draw(t, "expect"), *now, "")
	case 2:
		return &kvrpb.RaftUnbindSession{Key: key, Version: rapid.SampledFrom([]uint64{0, ver}).Draw(t, "uv")}
	case 3:
		return &kvrpb.RaftExpireSessions{StampedUnixNanos: *now, Sessions: refs}
	case 4:
		return &kvrpb.RaftTouchSessions{StampedUnixNanos: *now, IdleTtlNanos: int64(time.Minute), Sessions: refs}
	}
	return &kvrpb.RaftInvalidateEngine{WorkerId: rapid.Uint64Range(1, 2).Draw(t, "engine")}
}

// TestSessionStreamMatchesTable checks that, for any sequence of session
// and ownership commands, the session lists replayed from empty, and a
// snapshot taken midway plus the later batches, give the FSM's sessions
// table, and that every listed hash is a real transition.
func TestSessionStreamMatchesTable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := NewFSM(nil, nil, nil)
		next, now := map[routing.Worker]uint64{}, t0
		n := rapid.IntRange(1, 50).Draw(t, "entries")
		cut := rapid.IntRange(0, n).Draw(t, "cut")
		var mid OwnershipSnapshot
		for i := range n {
			if i == cut {
				mid = f.OwnershipSnapshot()
			}
			cmd := genSessionCmd(t, &now)
			if rapid.IntRange(0, 4).Draw(t, "blocks") == 0 {
				cmd = genEntry(t, next)
			}
			applyRapid(t, f, uint64(i+1), cmd)
		}
		if cut == n {
			mid = f.OwnershipSnapshot()
		}
		bs, err := f.Ownership().Since(0, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		full, fromMid := sessionSet{}, setOf(mid.Sessions)
		for _, b := range bs {
			if noops := full.apply(b); noops != 0 {
				t.Fatalf("batch %d lists %d session hashes that changed nothing", b.Index, noops)
			}
			if b.Index > mid.Index {
				fromMid.apply(b)
			}
		}
		want := f.OwnershipSnapshot().Sessions
		if !slices.Equal(full.sorted(), want) || !slices.Equal(fromMid.sorted(), want) {
			t.Fatalf("from empty %v, from snapshot at %d %v, table %v", full.sorted(), mid.Index, fromMid.sorted(), want)
		}
	})
}

// TestSessionRestoreResets checks that a restored FSM lists the same
// sessions in its snapshot and that watchers from before it are overrun,
// so they learn the restored sessions from that snapshot.
func TestSessionRestoreResets(t *testing.T) {
	f := NewFSM(nil, nil, nil)
	applyAt(t, f, 1, bindCmd("a", 1, 0, t0, ""))
	applyAt(t, f, 2, bindCmd("b", 2, 0, t0, ""))
	g := snapshotRoundTrip(t, f)
	if got, want := g.OwnershipSnapshot().Sessions, f.OwnershipSnapshot().Sessions; !slices.Equal(got, want) || len(got) != 2 {
		t.Fatalf("restored sessions %v, want %v", got, want)
	}
	if _, err := g.Ownership().Since(1, nil, 0); err == nil {
		t.Fatal("a position before the restore is still served from the ring")
	}
	applyAt(t, g, 3, &kvrpb.RaftUnbindSession{Key: "a"})
	if b, ok := batchAt(t, g, 3); !ok || !slices.Equal(b.SessionsUnbound, sh("a")) {
		t.Fatalf("unbind after restore: %+v", b)
	}
}

func TestSnapshotChunksWithSessions(t *testing.T) {
	tests := []struct {
		name       string
		rows       int
		sessions   int
		max        int
		wantChunks int
	}{
		{name: "sessions only", sessions: 3, max: 4, wantChunks: 1},
		{name: "sessions fill the rank chunk", rows: 2, sessions: 2, max: 4, wantChunks: 1},
		{name: "sessions spill", rows: 3, sessions: 6, max: 4, wantChunks: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := OwnershipSnapshot{Index: 9}
			if tc.rows > 0 {
				r := OwnershipRank{Worker: routing.Worker{ID: 1}}
				for j := range tc.rows {
					r.Hashes = append(r.Hashes, routing.SeqHash(j))
				}
				snap.Ranks = []OwnershipRank{r}
			}
			for j := range tc.sessions {
				snap.Sessions = append(snap.Sessions, uint64(100+j))
			}
			chunks := SnapshotChunks(snap, tc.max)
			if len(chunks) != tc.wantChunks {
				t.Fatalf("%d chunks, want %d", len(chunks), tc.wantChunks)
			}
			var got []uint64
			for i, c := range chunks {
				n := len(c.Sessions)
				for _, r := range c.Ranks {
					n += len(r.Hashes)
				}
				if n > tc.max || c.Seq != uint32(i) || c.Last != (i == len(chunks)-1) {
					t.Fatalf("chunk %d: %+v", i, c)
				}
				got = append(got, c.Sessions...)
			}
			if !slices.Equal(got, snap.Sessions) {
				t.Fatalf("sessions %v, want %v", got, snap.Sessions)
			}
		})
	}
}

// TestWatchCarriesSessions checks the wire: a snapshot lists the bound
// sessions, and live batches carry binds and unbinds, a session-only
// entry as a batch without ownership changes.
func TestWatchCarriesSessions(t *testing.T) {
	fx := newWatchFixture(t)
	fx.f.Ownership().SetLimits(1, 1<<20)
	fx.store(t, routing.Worker{ID: 1}, 1)
	fx.next++
	applyAt(t, fx.f, fx.next, bindCmd("a", 1, 0, t0, ""))
	fx.store(t, routing.Worker{ID: 1}, 1) // evicts the bind's batch: from 0 needs a snapshot
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := fx.client.Watch(ctx, &kvrpb.OwnershipWatchRequest{FromIndex: 0})
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if c := first.GetSnapshot(); c == nil || !c.Last || !slices.Equal(c.Sessions, sh("a")) {
		t.Fatalf("first message %v, want a one-chunk snapshot listing session a", first)
	}
	fx.f.Ownership().SetLimits(DefaultWatchBatches, DefaultWatchHashes)
	fx.next++
	applyAt(t, fx.f, fx.next, bindCmd("b", 1, 0, t0, ""))
	fx.next++
	applyAt(t, fx.f, fx.next, &kvrpb.RaftUnbindSession{Key: "a"})
	for _, want := range []struct{ bound, unbound []uint64 }{{sh("b"), nil}, {nil, sh("a")}} {
		msg, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		b := msg.GetBatch()
		if b == nil || len(b.Changes) != 0 || !slices.Equal(b.SessionsBound, want.bound) || !slices.Equal(b.SessionsUnbound, want.unbound) {
			t.Fatalf("batch %v, want bound %v unbound %v", msg, want.bound, want.unbound)
		}
	}
}
