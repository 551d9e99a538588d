package consumer

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/test/bufconn"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/relay/publish"
	"github.com/kvrouter/kvrouter/routing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// domain is the cache domain every test pool shares.
var domain = producer.Domain{Model: "m", BlockSize: 16, HashScheme: producer.HashSchemeXXH3Chain, HashSeed: 1337}

// poolIn returns the test pool of dc.
func poolIn(dc string) producer.PoolID { return producer.PoolID{DC: dc, Domain: domain} }

// testKind is the summary kind newProducer publishes. Tests run
// sequentially; TestProtocolCompactSummaries switches it for its subtests.
var testKind = filter.KindCuckoo

// newProducer returns a producer of pool with a fixed-seed generator.
func newProducer(t testing.TB, pool producer.PoolID, capacity int, seed uint64, queue int) *producer.Producer {
	t.Helper()
	p, err := producer.New(pool, producer.Config{Filter: filter.Config{Capacity: capacity, Seed: 11, Kind: testKind}, QueueLen: queue}, rand.New(rand.NewPCG(seed, 7)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// faults lets a test drop or hold back the server's messages.
type faults struct {
	dropSeq atomic.Uint64 // drop the delta with this seq once (0: none)
	mu      sync.Mutex
	gate    chan struct{} // while non-nil, sends wait for it to close
}

// hold makes sends wait until the returned function is called.
func (f *faults) hold() func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := make(chan struct{})
	f.gate = g
	return func() {
		f.mu.Lock()
		f.gate = nil
		f.mu.Unlock()
		close(g)
	}
}

// interceptor applies the faults to every stream the server sends.
func (f *faults) interceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, &faultyStream{ServerStream: ss, f: f})
}

type faultyStream struct {
	grpc.ServerStream
	f *faults
}

func (s *faultyStream) SendMsg(m any) error {
	s.f.mu.Lock()
	g := s.f.gate
	s.f.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-s.Context().Done():
			return s.Context().Err()
		}
	}
	if d := m.(*kvrpb.RelayMessage).GetDelta(); d != nil && s.f.dropSeq.CompareAndSwap(d.GetSeq(), 0) {
		return nil
	}
	return s.ServerStream.SendMsg(m)
}

// server is one publishing relay on a listener.
type server struct {
	srv    *publish.Server
	faults *faults
	client kvrpb.RelayClient
}

// startServer serves a new publish.Server over bufconn (lis nil) or lis,
// with dial wrapping each client connection (nil for none).
func startServer(t testing.TB, lis net.Listener, creds credentials.TransportCredentials, clientCreds credentials.TransportCredentials, wrap func(net.Conn) net.Conn) *server {
	t.Helper()
	srv, err := publish.NewServer(publish.ServerConfig{ChunkBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	s := &server{srv: srv, faults: &faults{}}
	gs := grpc.NewServer(append(publish.ServerOptions(creds), grpc.StreamInterceptor(s.faults.interceptor))...)
	kvrpb.RegisterRelayServer(gs, srv)
	target := "passthrough:///bufnet"
	var dial func(ctx context.Context, addr string) (net.Conn, error)
	if lis == nil {
		bl := bufconn.Listen(1 << 20)
		lis = bl
		dial = func(ctx context.Context, _ string) (net.Conn, error) { return bl.DialContext(ctx) }
	} else {
		target = "passthrough:///" + lis.Addr().String()
		dial = func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}
	}
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient(target, append(publish.DialOptions(clientCreds), grpc.WithContextDialer(
		func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := dial(ctx, addr)
			if err == nil && wrap != nil {
				c = wrap(c)
			}
			return c, err
		}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
	})
	s.client = kvrpb.NewRelayClient(conn)
	return s
}

// newConsumer returns a consumer with fast backoff on the real clock; it
// is closed at cleanup.
func newConsumer(t testing.TB, observe func(producer.PoolID, publish.Event, time.Time)) *Consumer {
	t.Helper()
	c, err := New(Config{SubscriberID: "test", Seed: 1, Now: time.Now, BackoffBase: time.Millisecond, BackoffMax: 20 * time.Millisecond, Observe: observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// waitConverged waits until the lane's filter encodes like p's.
func waitConverged(t testing.TB, l *Lane, p *producer.Producer) {
	t.Helper()
	waittest.UntilNil(t, 10*time.Second, fmt.Sprintf("lane %v holds the producer's state", l.Pool()), func() error {
		want, _ := p.MarshalBinary()
		got, _ := l.MarshalBinary()
		if !bytes.Equal(got, want) {
			return fmt.Errorf("lane status %+v", l.Status(time.Now()))
		}
		return nil
	})
}

// chain returns n block hashes of one synthetic request.
func chain(rng *rand.Rand, n int) []routing.SeqHash {
	hs := make([]routing.SeqHash, n)
	for i := range hs {
		hs[i] = routing.SeqHash(rng.Uint64())
	}
	return hs
}

// storeBatch stores hs on one rank.
func storeBatch(w routing.WorkerID, hs ...routing.SeqHash) producer.Batch {
	return producer.Batch{Changes: []producer.Change{{Kind: producer.Stored, Worker: routing.Worker{ID: w}, Hashes: hs}}}
}

// removeBatch removes hs from one rank.
func removeBatch(w routing.WorkerID, hs ...routing.SeqHash) producer.Batch {
	return producer.Batch{Changes: []producer.Change{{Kind: producer.Removed, Worker: routing.Worker{ID: w}, Hashes: hs}}}
}
