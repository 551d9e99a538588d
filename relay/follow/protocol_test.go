package follow

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
)

// script is what one Watch call of a fake server sends: msgs, then err, or
// nothing more until the client goes away when err is nil.
type script struct {
	msgs []*kvrpb.OwnershipWatchMessage
	err  error
}

// fakeServer plays scripts, one per Watch call, and records from_index.
type fakeServer struct {
	kvrpb.UnimplementedOwnershipServer
	mu      sync.Mutex
	scripts []script
	froms   []uint64
}

func (f *fakeServer) Watch(req *kvrpb.OwnershipWatchRequest, stream grpc.ServerStreamingServer[kvrpb.OwnershipWatchMessage]) error {
	f.mu.Lock()
	f.froms = append(f.froms, req.FromIndex)
	var sc script
	if len(f.scripts) > 0 {
		sc, f.scripts = f.scripts[0], f.scripts[1:]
	}
	f.mu.Unlock()
	for _, m := range sc.msgs {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	if sc.err != nil {
		return sc.err
	}
	<-stream.Context().Done()
	return nil
}

// serveFakes serves each fake on its own bufconn and returns a Source over
// them, in order.
func serveFakes(t *testing.T, fakes ...*fakeServer) *Source {
	t.Helper()
	lis := map[string]*bufconn.Listener{}
	var addrs []string
	for i, f := range fakes {
		name := string(rune('a' + i))
		l := bufconn.Listen(1 << 16)
		lis[name] = l
		srv := grpc.NewServer()
		kvrpb.RegisterOwnershipServer(srv, f)
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(srv.Stop)
		addrs = append(addrs, "passthrough:///"+name)
	}
	dial := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return lis[addr].DialContext(ctx) })
	src, err := New(Config{Addrs: addrs, DialOptions: []grpc.DialOption{dial, grpc.WithTransportCredentials(insecure.NewCredentials())},
		MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	return src
}

func wbatch(index, prev uint64, changes ...*kvrpb.OwnershipChange) *kvrpb.OwnershipWatchMessage {
	return &kvrpb.OwnershipWatchMessage{Body: &kvrpb.OwnershipWatchMessage_Batch{Batch: &kvrpb.OwnershipBatch{Index: index, PrevIndex: prev, Changes: changes}}}
}

func wchange(kind kvrpb.OwnershipChangeKind, id uint64, rank uint32, hs ...uint64) *kvrpb.OwnershipChange {
	return &kvrpb.OwnershipChange{Kind: kind, EngineId: id, Rank: rank, Hashes: hs}
}

func wchunk(index uint64, seq uint32, last bool, ranks ...*kvrpb.OwnershipRank) *kvrpb.OwnershipWatchMessage {
	return &kvrpb.OwnershipWatchMessage{Body: &kvrpb.OwnershipWatchMessage_Snapshot{Snapshot: &kvrpb.OwnershipSnapshotChunk{Index: index, Seq: seq, Last: last, Ranks: ranks}}}
}

func change(kind producer.ChangeKind, id routing.WorkerID, rank uint32, hs ...routing.SeqHash) producer.Change {
	if len(hs) == 0 {
		hs = nil
	}
	return producer.Change{Kind: kind, Worker: routing.Worker{ID: id, Rank: rank}, Hashes: hs}
}

// withSessions adds session lists to a batch message.
func withSessions(m *kvrpb.OwnershipWatchMessage, bound, unbound []uint64) *kvrpb.OwnershipWatchMessage {
	m.GetBatch().SessionsBound, m.GetBatch().SessionsUnbound = bound, unbound
	return m
}

// chunkSessions adds bound sessions to a snapshot chunk message.
func chunkSessions(m *kvrpb.OwnershipWatchMessage, hs ...uint64) *kvrpb.OwnershipWatchMessage {
	m.GetSnapshot().Sessions = hs
	return m
}

const (
	kStored  = kvrpb.OwnershipChangeKind_OWNERSHIP_CHANGE_KIND_STORED
	kRemoved = kvrpb.OwnershipChangeKind_OWNERSHIP_CHANGE_KIND_REMOVED
	kCleared = kvrpb.OwnershipChangeKind_OWNERSHIP_CHANGE_KIND_RANK_CLEARED
)

// TestSourceProtocol drives a Source through an overrun, a chunked
// snapshot and a gap, and checks every delivered batch, every from_index
// asked for and the counters.
func TestSourceProtocol(t *testing.T) {
	f := &fakeServer{scripts: []script{
		{msgs: []*kvrpb.OwnershipWatchMessage{
			withSessions(wbatch(5, 0, wchange(kStored, 1, 0, 1, 2)), []uint64{100, 101}, nil),
			withSessions(wbatch(6, 5), nil, []uint64{100}), // a session-only entry
			wbatch(7, 6, wchange(kRemoved, 1, 0, 1)),
		}, err: status.Error(codes.OutOfRange, "overrun")},
		{msgs: []*kvrpb.OwnershipWatchMessage{
			chunkSessions(wchunk(9, 0, false, &kvrpb.OwnershipRank{EngineId: 2, Hashes: []uint64{3}}), 200),
			chunkSessions(wchunk(9, 1, true, &kvrpb.OwnershipRank{EngineId: 2, Hashes: []uint64{4}}, &kvrpb.OwnershipRank{EngineId: 3, Rank: 1, Hashes: []uint64{5}}), 201),
			wbatch(10, 9, wchange(kStored, 3, 1, 6)),
			wbatch(12, 11, wchange(kStored, 3, 1, 7)), // a gap: prev 11 is past 10
		}},
		{msgs: []*kvrpb.OwnershipWatchMessage{wbatch(12, 10, wchange(kCleared, 3, 1))}},
	}}
	src := serveFakes(t, f)
	want := []producer.Batch{
		{Index: 5, Changes: []producer.Change{change(producer.Stored, 1, 0, 1, 2)},
			Sessions: []producer.Change{change(producer.Stored, 0, 0, 100, 101)}},
		{Index: 6, Changes: []producer.Change{}, Sessions: []producer.Change{change(producer.Removed, 0, 0, 100)}},
		{Index: 7, Changes: []producer.Change{change(producer.Removed, 1, 0, 1)}},
		{Index: 9, Replace: true, Changes: []producer.Change{
			change(producer.Stored, 2, 0, 3, 4), change(producer.Stored, 3, 1, 5),
		}, Sessions: []producer.Change{change(producer.Stored, 0, 0, 200, 201)}},
		{Index: 10, Changes: []producer.Change{change(producer.Stored, 3, 1, 6)}},
		{Index: 12, Changes: []producer.Change{change(producer.RankCleared, 3, 1)}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, w := range want {
		got, err := src.Next(ctx)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("batch %d:\n got %+v\nwant %+v", i, got, w)
		}
	}
	f.mu.Lock()
	froms := f.froms
	f.mu.Unlock()
	if !reflect.DeepEqual(froms, []uint64{0, 7, 10}) {
		t.Fatalf("from indexes %v, want [0 7 10]", froms)
	}
	st := src.Stats()
	if st.Overruns != 1 || st.Gaps != 1 || st.Snapshots != 1 || st.Batches != 6 || st.Index != 12 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSourceFailsOver checks that a node refusing the watch sends the
// Source to the next address, resuming from the same index.
func TestSourceFailsOver(t *testing.T) {
	down := &fakeServer{scripts: []script{{err: status.Error(codes.Unavailable, "down")}}}
	up := &fakeServer{scripts: []script{{msgs: []*kvrpb.OwnershipWatchMessage{wbatch(3, 0, wchange(kStored, 1, 0, 9))}}}}
	src := serveFakes(t, down, up)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := src.Next(ctx)
	if err != nil || b.Index != 3 {
		t.Fatalf("got %+v, %v", b, err)
	}
	if st := src.Stats(); st.Failures != 1 || st.Connects != 2 {
		t.Fatalf("stats %+v, want one failure and two connects", st)
	}
}

// TestSourceNextEnds checks that a blocked Next ends with ctx's error or
// ErrClosed, keeping the index for the next call.
func TestSourceNextEnds(t *testing.T) {
	tests := []struct {
		name string
		end  func(cancel context.CancelFunc, src *Source)
		want error
	}{
		{name: "context cancelled", end: func(cancel context.CancelFunc, _ *Source) { cancel() }, want: context.Canceled},
		{name: "source closed", end: func(_ context.CancelFunc, src *Source) { _ = src.Close() }, want: ErrClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeServer{scripts: []script{{msgs: []*kvrpb.OwnershipWatchMessage{wbatch(4, 0, wchange(kStored, 1, 0, 1))}}}}
			src := serveFakes(t, f)
			if _, err := src.Next(context.Background()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { _, err := src.Next(ctx); done <- err }()
			waittest.Until(t, 10*time.Second, "Next is blocked receiving", func() bool { return parkedIn("follow.(*Source).recv(") })
			tc.end(cancel, src)
			select {
			case err := <-done:
				if !errors.Is(err, tc.want) {
					t.Fatalf("Next ended with %v, want %v", err, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Next did not end")
			}
			if src.Index() != 4 {
				t.Fatalf("index %d, want 4", src.Index())
			}
		})
	}
}

// parkedIn reports whether a goroutine is parked in a select or a channel
// receive with fn on its stack: the state of a call that waits for
// something to happen.
func parkedIn(fn string) bool {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(g, fn) && (strings.Contains(header, "[select") || strings.Contains(header, "[chan receive")) {
			return true
		}
	}
	return false
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{name: "defaults", cfg: Config{Addrs: []string{"a"}}, ok: true},
		{name: "no address", cfg: Config{}},
		{name: "empty address", cfg: Config{Addrs: []string{"a", ""}}},
		{name: "inverted backoff", cfg: Config{Addrs: []string{"a"}, MinBackoff: time.Second, MaxBackoff: time.Millisecond}},
		{name: "small messages", cfg: Config{Addrs: []string{"a"}, MaxMessageBytes: 1024}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.EnsureDefaults()
			if err := tc.cfg.Validate(); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrConfig)) {
				t.Fatalf("Validate: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
