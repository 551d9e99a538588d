package consensus

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// watchFixture serves one bare FSM's Ownership service over bufconn.
type watchFixture struct {
	f      *FSM
	stop   chan struct{}
	client kvrpb.OwnershipClient
	next   uint64
	ids    map[routing.Worker]uint64
}

func newWatchFixture(t *testing.T) *watchFixture {
	t.Helper()
	fx := &watchFixture{f: NewFSM(nil, nil, nil), stop: make(chan struct{}), ids: map[routing.Worker]uint64{}}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	kvrpb.RegisterOwnershipServer(srv, &ownershipServer{f: fx.f, stop: fx.stop})
	go func() { _ = srv.Serve(lis) }()
	// A fixed receive window (no BDP growth), so that an unread stream
	// stalls the server after a few large batches.
	cc, err := grpc.NewClient("passthrough:///watch",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close(); srv.Stop() })
	fx.client = kvrpb.NewOwnershipClient(cc)
	return fx
}

// store applies one entry of events new 4-block events on rank w.
func (fx *watchFixture) store(t *testing.T, w routing.Worker, events int) {
	fx.next++
	cmd := &kvrpb.RaftKVEvents{Batches: []*kvrpb.KVEventBatch{kvBatch(w, fx.ids[w]+1, events, fx.next)}}
	fx.ids[w] += uint64(events)
	applyAt(t, fx.f, fx.next, cmd)
}

// recvModel reads a stream into a model until its position reaches until,
// and returns that position.
func recvModel(t *testing.T, s grpc.ServerStreamingClient[kvrpb.OwnershipWatchMessage], m ownModel, until uint64) uint64 {
	t.Helper()
	var pos uint64
	for pos < until {
		msg, err := s.Recv()
		if err != nil {
			t.Fatalf("at %d: %v", pos, err)
		}
		if c := msg.GetSnapshot(); c != nil {
			for _, r := range c.Ranks {
				for _, h := range r.Hashes {
					m.add(routing.Worker{ID: routing.WorkerID(r.EngineId), Rank: r.Rank}, routing.SeqHash(h))
				}
			}
			if c.Last {
				pos = c.Index
			}
			continue
		}
		b := msg.GetBatch()
		if b.PrevIndex > pos && pos != 0 {
			t.Fatalf("batch %d: prev %d above position %d", b.Index, b.PrevIndex, pos)
		}
		m.apply(batchFromProtoForTest(b))
		pos = b.Index
	}
	return pos
}

// batchFromProtoForTest decodes a wire batch.
func batchFromProtoForTest(b *kvrpb.OwnershipBatch) OwnershipBatch {
	out := OwnershipBatch{Index: b.Index, Prev: b.PrevIndex}
	for _, c := range b.Changes {
		oc := routing.Change{Kind: routing.ChangeKind(c.Kind), Worker: routing.Worker{ID: routing.WorkerID(c.EngineId), Rank: c.Rank}}
		for _, h := range c.Hashes {
			oc.Hashes = append(oc.Hashes, routing.SeqHash(h))
		}
		out.Changes = append(out.Changes, oc)
	}
	return out
}

func TestWatchServesRingOrSnapshot(t *testing.T) {
	tests := []struct {
		name     string
		limit    int // ring batches
		from     uint64
		wantSnap bool
	}{
		{name: "ring covers the position", limit: 100, from: 0, wantSnap: false},
		{name: "ring covers a later position", limit: 100, from: 2, wantSnap: false},
		{name: "overrun position gets a snapshot", limit: 2, from: 1, wantSnap: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fx := newWatchFixture(t)
			fx.f.Ownership().SetLimits(tc.limit, 1<<20)
			for i := range 5 {
				fx.store(t, routing.Worker{ID: routing.WorkerID(i%2 + 1)}, 2)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s, err := fx.client.Watch(ctx, &kvrpb.OwnershipWatchRequest{FromIndex: tc.from})
			if err != nil {
				t.Fatal(err)
			}
			first, err := s.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if got := first.GetSnapshot() != nil; got != tc.wantSnap {
				t.Fatalf("first message snapshot=%v, want %v", got, tc.wantSnap)
			}
			// The watcher's state at from: a model of what it held then.
			m := ownModel{}
			if !tc.wantSnap {
				whole, _ := fx.f.Ownership().Since(0, nil, 0)
				for _, b := range whole {
					if b.Index <= tc.from {
						m.apply(b)
					}
				}
				m.apply(batchFromProtoForTest(first.GetBatch()))
			} else {
				for _, r := range first.GetSnapshot().Ranks {
					for _, h := range r.Hashes {
						m.add(routing.Worker{ID: routing.WorkerID(r.EngineId), Rank: r.Rank}, routing.SeqHash(h))
					}
				}
			}
			fx.store(t, routing.Worker{ID: 3}, 3) // a live batch
			recvModel(t, s, m, fx.f.AppliedIndex())
			if want := modelOf(fx.f.OwnershipSnapshot()); !m.equal(want) {
				t.Fatalf("watcher %v, FSM %v", m, want)
			}
		})
	}
}

// TestWatchOverrunEndsStream checks that a watcher that stops reading
// while the ring moves past it gets OUT_OF_RANGE, never a gap.
func TestWatchOverrunEndsStream(t *testing.T) {
	fx := newWatchFixture(t)
	fx.f.Ownership().SetLimits(4, 1<<20)
	// A failure bound: the hundred stores below take seconds under the
	// race detector on a loaded machine (7 s seen with 5 s here).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := fx.client.Watch(ctx, &kvrpb.OwnershipWatchRequest{FromIndex: 0})
	if err != nil {
		t.Fatal(err)
	}
	// The watcher follows the ring once its first batch arrived. Without
	// that, a server handler that starts after the ring moved on (a
	// loaded machine) rightly begins with a snapshot instead.
	fx.store(t, routing.Worker{ID: 1}, 500) // 2,000 hashes, 16 KiB a batch
	first, err := s.Recv()
	if err != nil || first.GetBatch() == nil || first.GetBatch().PrevIndex != 0 {
		t.Fatalf("first message: batch %v, snapshot %v, err %v; want the first batch", first.GetBatch() != nil, first.GetSnapshot() != nil, err)
	}
	pos := first.GetBatch().Index
	for range 99 {
		fx.store(t, routing.Worker{ID: 1}, 500)
	}
	for {
		msg, err := s.Recv()
		if err != nil {
			if status.Code(err) != codes.OutOfRange {
				t.Fatalf("stream ended with %v, want OUT_OF_RANGE", err)
			}
			break
		}
		b := msg.GetBatch()
		if b == nil || b.PrevIndex > pos {
			t.Fatalf("unexpected message %v at position %d", msg, pos)
		}
		pos = b.Index
	}
	if pos >= fx.f.AppliedIndex() {
		t.Fatalf("read every batch up to %d: the ring was never overrun", pos)
	}
}

// TestWatchEndsOnStop checks that a waiting stream ends with UNAVAILABLE
// when the node stops.
func TestWatchEndsOnStop(t *testing.T) {
	fx := newWatchFixture(t)
	s, err := fx.client.Watch(context.Background(), &kvrpb.OwnershipWatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	close(fx.stop)
	if _, err := s.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want UNAVAILABLE", err)
	}
}

func TestSnapshotChunks(t *testing.T) {
	tests := []struct {
		name       string
		ranks      []int
		max        int
		wantChunks int
	}{
		{name: "empty", ranks: nil, max: 4, wantChunks: 1},
		{name: "fits", ranks: []int{2, 2}, max: 4, wantChunks: 1},
		{name: "rank split", ranks: []int{9}, max: 4, wantChunks: 3},
		{name: "ranks packed", ranks: []int{3, 3, 3}, max: 4, wantChunks: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := OwnershipSnapshot{Index: 42}
			rows := 0
			for i, n := range tc.ranks {
				r := OwnershipRank{Worker: routing.Worker{ID: routing.WorkerID(i + 1)}}
				for j := range n {
					r.Hashes = append(r.Hashes, routing.SeqHash(j))
				}
				snap.Ranks, rows = append(snap.Ranks, r), rows+n
			}
			chunks := SnapshotChunks(snap, tc.max)
			if len(chunks) != tc.wantChunks {
				t.Fatalf("%d chunks, want %d", len(chunks), tc.wantChunks)
			}
			got := 0
			for i, c := range chunks {
				n := 0
				for _, r := range c.Ranks {
					n += len(r.Hashes)
				}
				if c.Index != 42 || c.Seq != uint32(i) || c.Last != (i == len(chunks)-1) || n > tc.max {
					t.Fatalf("chunk %d: %+v", i, c)
				}
				got += n
			}
			if got != rows {
				t.Fatalf("%d rows in chunks, want %d", got, rows)
			}
		})
	}
}

// TestChangeKindsMatchTheWire checks the equality BatchToProto's cast
// relies on: each routing.ChangeKind is the wire kind of the same name.
func TestChangeKindsMatchTheWire(t *testing.T) {
	for k := routing.ChangeStored; k <= routing.ChangeWorkerRemoved; k++ {
		want := "OWNERSHIP_CHANGE_KIND_" + strings.ToUpper(k.String())
		if got := kvrpb.OwnershipChangeKind(k).String(); got != want {
			t.Errorf("kind %d is %s on the wire, want %s", k, got, want)
		}
	}
}
