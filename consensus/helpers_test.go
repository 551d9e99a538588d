package consensus

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// fakeClock is a settable clock for stamped times.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// testCluster is n nodes over raft's in-memory transport, with leader
// forwarding over in-process gRPC (bufconn).
type testCluster struct {
	t     testing.TB
	clock *fakeClock
	nodes []*Node
	trans []*raft.InmemTransport
	srvs  []*grpc.Server
	lis   map[string]*bufconn.Listener
	down  []bool
}

// fastConfig is a node config with test-sized raft timeouts.
func fastConfig(id string, clock *fakeClock) Config {
	return Config{
		NodeID: id, DC: "dc1", Bootstrap: true,
		// Quick elections, but a lease that a loaded two-core machine does
		// not lose to a scheduling stall: at 50 ms leaders stepped down
		// mid-test under a parallel build.
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 200 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		ApplyTimeout: 3 * time.Second, BarrierTimeout: 3 * time.Second,
		ExpiryInterval: 20 * time.Millisecond, Now: clock.Now,
	}
}

func newCluster(t testing.TB, n int) *testCluster {
	t.Helper()
	return newClusterWith(t, n, nil)
}

// newClusterWith is newCluster with a hook that adjusts each node's config.
func newClusterWith(t testing.TB, n int, adjust func(*Config)) *testCluster {
	t.Helper()
	return newClusterStates(t, n, adjust, nil)
}

// newClusterStates is newClusterWith with node i's FSM over state(i)
// (every node's own MemState when state is nil).
func newClusterStates(t testing.TB, n int, adjust func(*Config), state func(i int) State) *testCluster {
	t.Helper()
	c := &testCluster{t: t, clock: newFakeClock(), lis: map[string]*bufconn.Listener{}, down: make([]bool, n)}
	var peers []Peer
	for i := range n {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("raft-%d", i)))
		c.trans = append(c.trans, tr)
		name := fmt.Sprintf("api-%d", i)
		c.lis[name] = bufconn.Listen(1 << 20)
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: string(addr), APIAddr: "passthrough:///" + name})
	}
	for i := range c.trans {
		for j := range c.trans {
			if i != j {
				c.trans[i].Connect(c.trans[j].LocalAddr(), c.trans[j])
			}
		}
	}
	dial := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return c.lis[addr].DialContext(ctx)
	})
	for i := range n {
		cfg := fastConfig(peers[i].ID, c.clock)
		cfg.Peers, cfg.DialOptions = peers, []grpc.DialOption{dial}
		if adjust != nil {
			adjust(&cfg)
		}
		deps := Deps{Transport: c.trans[i]}
		if state != nil {
			deps.State = state(i)
		}
		node, err := New(cfg, deps)
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer(node.ServerOptions()...)
		node.RegisterForwarding(srv)
		node.RegisterAdmin(srv)
		go func() { _ = srv.Serve(c.lis[fmt.Sprintf("api-%d", i)]) }()
		c.nodes, c.srvs = append(c.nodes, node), append(c.srvs, srv)
	}
	t.Cleanup(c.close)
	return c
}

// close shuts every raft down before closing any transport (the order
// that leaves no goroutine behind).
func (c *testCluster) close() {
	for _, s := range c.srvs {
		s.Stop()
	}
	for i, n := range c.nodes {
		if !c.down[i] {
			_ = n.Shutdown()
		}
	}
	for _, tr := range c.trans {
		_ = tr.Close()
	}
}

// kill shuts node i down, as a crash would.
func (c *testCluster) kill(i int) {
	c.srvs[i].Stop()
	_ = c.nodes[i].Shutdown()
	c.down[i] = true
}

// leader waits for a ready leader among the live nodes.
func (c *testCluster) leader() int {
	c.t.Helper()
	l := -1
	waittest.Until(c.t, 10*time.Second, "a live node is a ready leader", func() bool {
		for i, n := range c.nodes {
			if !c.down[i] && n.Ready() {
				l = i
				return true
			}
		}
		return false
	})
	return l
}

// follower returns a live node other than i.
func (c *testCluster) follower(i int) int {
	for j := range c.nodes {
		if j != i && !c.down[j] {
			return j
		}
	}
	return -1
}

// converge waits until the live nodes in ids (all live when nil) applied
// the same index, and returns their hashes.
func (c *testCluster) converge(ids ...int) []uint64 {
	c.t.Helper()
	if ids == nil {
		for i := range c.nodes {
			if !c.down[i] {
				ids = append(ids, i)
			}
		}
	}
	var hs []uint64
	waittest.UntilNil(c.t, 10*time.Second, fmt.Sprintf("nodes %v applied the commit index with one state", ids), func() error {
		var idx []uint64
		hs = hs[:0]
		for _, i := range ids {
			a, h := c.nodes[i].FSM().StateHash()
			idx, hs = append(idx, a), append(hs, h)
		}
		commit := c.nodes[ids[0]].Raft().CommitIndex()
		for k := range idx {
			if idx[k] != idx[0] || idx[k] < commit {
				return fmt.Errorf("applied %v, commit index %d", idx, commit)
			}
		}
		return nil
	})
	return hs
}

// applyAt applies an encoded command to f as entry idx.
func applyAt(t testing.TB, f *FSM, idx uint64, m proto.Message) *kvrpb.RaftResult {
	t.Helper()
	data, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	v := f.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data})
	r, err := unwrapResponse(v)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
