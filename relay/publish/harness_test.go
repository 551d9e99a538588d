package publish

import (
	"context"
	"math/rand/v2"
	"net"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/producer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testPool is the pool the tests publish.
var testPool = producer.PoolID{DC: "dc-a", Domain: producer.Domain{Model: "m", BlockSize: 16, HashScheme: producer.HashSchemeXXH3Chain, HashSeed: 1337}}

// newProducer returns a producer with a fixed-seed generator.
func newProducer(t testing.TB, seed uint64, queue int) *producer.Producer {
	t.Helper()
	p, err := producer.New(testPool, producer.Config{Filter: filter.Config{Capacity: 4096, Seed: 5}, QueueLen: queue}, rand.New(rand.NewPCG(seed, 1)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// serve starts srv on a bufconn listener with the given interceptor (nil
// for none) and returns a client; both stop at cleanup.
func serve(t testing.TB, srv *Server, interceptor grpc.StreamServerInterceptor) kvrpb.RelayClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	opts := ServerOptions(nil)
	if interceptor != nil {
		opts = append(opts, grpc.StreamInterceptor(interceptor))
	}
	gs := grpc.NewServer(opts...)
	kvrpb.RegisterRelayServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet", append(DialOptions(nil),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
	})
	return kvrpb.NewRelayClient(conn)
}
