package follow

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// cluster is a 3-node router cluster over raft's in-memory transport, each
// node serving forwarding and Ownership on a bufconn gRPC server.
type cluster struct {
	t     testing.TB
	nodes []*consensus.Node
	trans []*raft.InmemTransport
	srvs  []*grpc.Server
	lis   map[string]*bufconn.Listener
	down  []bool
	addrs []string
	dial  grpc.DialOption
	rng   *rand.Rand
	ids   map[routing.Worker]uint64
	held  map[routing.Worker][]routing.EngineHash
	salt  uint64
}

func newCluster(t testing.TB, n int) *cluster {
	t.Helper()
	c := &cluster{t: t, lis: map[string]*bufconn.Listener{}, down: make([]bool, n), rng: rand.New(rand.NewPCG(3, 4)),
		ids: map[routing.Worker]uint64{}, held: map[routing.Worker][]routing.EngineHash{}}
	var peers []consensus.Peer
	for i := range n {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("raft-%d", i)))
		c.trans = append(c.trans, tr)
		name := fmt.Sprintf("api-%d", i)
		c.lis[name] = bufconn.Listen(1 << 20)
		c.addrs = append(c.addrs, "passthrough:///"+name)
		peers = append(peers, consensus.Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: string(addr), APIAddr: "passthrough:///" + name})
	}
	for i := range c.trans {
		for j := range c.trans {
			if i != j {
				c.trans[i].Connect(c.trans[j].LocalAddr(), c.trans[j])
			}
		}
	}
	c.dial = grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return c.lis[addr].DialContext(ctx)
	})
	for i := range n {
		c.start(i, peers)
	}
	t.Cleanup(c.close)
	return c
}

// start builds node i and its API server.
func (c *cluster) start(i int, peers []consensus.Peer) {
	cfg := consensus.Config{
		NodeID: peers[i].ID, DC: "dc1", Bootstrap: true, Peers: peers,
		HeartbeatTimeout: 50 * time.Millisecond, ElectionTimeout: 50 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		ApplyTimeout: 500 * time.Millisecond, BarrierTimeout: 500 * time.Millisecond,
		ExpiryInterval: time.Hour, DialOptions: []grpc.DialOption{c.dial, grpc.WithTransportCredentials(insecure.NewCredentials())},
		Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) },
	}
	node, err := consensus.New(cfg, consensus.Deps{Transport: c.trans[i]})
	if err != nil {
		c.t.Fatal(err)
	}
	srv := grpc.NewServer()
	node.RegisterForwarding(srv)
	node.RegisterOwnership(srv)
	lis := c.lis[fmt.Sprintf("api-%d", i)]
	go func() { _ = srv.Serve(lis) }()
	c.nodes, c.srvs = append(c.nodes, node), append(c.srvs, srv)
}

// close shuts every raft down before closing any transport.
func (c *cluster) close() {
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

// kill crashes node i: its API server stops, then its raft.
func (c *cluster) kill(i int) {
	c.srvs[i].Stop()
	_ = c.nodes[i].Shutdown()
	c.down[i] = true
}

// leader waits for a ready leader among the live nodes.
func (c *cluster) leader() int {
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

// traffic applies entries KV-events entries of random stored, removed and
// cleared events over 6 ranks of 3 engines, through the leader.
func (c *cluster) traffic(entries int) {
	c.t.Helper()
	leader := c.nodes[c.leader()]
	for range entries {
		var batches []*kvrpb.KVEventBatch
		for range 1 + c.rng.IntN(3) {
			w := routing.Worker{ID: routing.WorkerID(1 + c.rng.IntN(3)), Rank: uint32(c.rng.IntN(2))}
			batches = append(batches, wire.EncodeBatch(w, 1, []routing.Event{c.event(w)}))
		}
		if _, err := leader.ApplyRetry(context.Background(), &kvrpb.RaftKVEvents{Batches: batches}); err != nil {
			c.t.Fatal(err)
		}
	}
}

// event draws the next event of w: mostly stores of 1-4 new blocks, some
// removals of held blocks, rare clears.
func (c *cluster) event(w routing.Worker) routing.Event {
	c.ids[w]++
	ev := routing.Event{Worker: w, ID: c.ids[w]}
	held := c.held[w]
	switch r := c.rng.IntN(20); {
	case r == 0:
		ev.Kind = routing.EventCleared
		c.held[w] = nil
	case r < 6 && len(held) > 0:
		k := c.rng.IntN(len(held))
		ev.Kind, ev.Removed = routing.EventRemoved, []routing.EngineHash{held[k]}
		c.held[w] = append(held[:k], held[k+1:]...)
	default:
		ev.Kind = routing.EventStored
		for range 1 + c.rng.IntN(4) {
			c.salt++
			eh := routing.EngineHash(c.salt)
			// Local hashes repeat across ranks, so blocks are shared.
			ev.Blocks = append(ev.Blocks, routing.StoredBlock{Engine: eh, Local: routing.LocalHash(c.salt % 50)})
			c.held[w] = append(c.held[w], eh)
		}
	}
	return ev
}

// removeWorker drops engine id through raft.
func (c *cluster) removeWorker(id routing.WorkerID) {
	c.t.Helper()
	if _, err := c.nodes[c.leader()].RemoveWorker(context.Background(), id); err != nil {
		c.t.Fatal(err)
	}
	for w := range c.held {
		if w.ID == id {
			delete(c.held, w)
			delete(c.ids, w)
		}
	}
}

// newProducer returns a producer with a fixed-seed generator.
func newProducer(t testing.TB) *producer.Producer {
	t.Helper()
	pool := producer.PoolID{DC: "dc1", Domain: producer.Domain{Model: "m", BlockSize: 16, HashScheme: producer.HashSchemeXXH3Chain, HashSeed: 1}}
	p, err := producer.New(pool, producer.Config{Filter: filter.Config{Capacity: 1 << 12, Seed: 7}}, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// matches reports whether p holds exactly the rows of snap.
func matches(p *producer.Producer, snap consensus.OwnershipSnapshot) bool {
	if p.Stats().Contributions != snap.Rows() {
		return false
	}
	for _, r := range snap.Ranks {
		for _, h := range r.Hashes {
			if !p.Holds(r.Worker, h) {
				return false
			}
		}
	}
	return true
}

// waitMatch waits until p holds exactly the leader's ownership. Writes go
// through the leader and return once it applied them, so its FSM holds
// every write made so far.
func (c *cluster) waitMatch(p *producer.Producer) {
	c.t.Helper()
	var snap consensus.OwnershipSnapshot
	f := c.nodes[c.leader()].FSM()
	waittest.UntilNil(c.t, 10*time.Second, "the producer holds the leader's ownership", func() error {
		if snap = f.OwnershipSnapshot(); !matches(p, snap) {
			return fmt.Errorf("producer holds %d rows, the leader's FSM %d at index %d", p.Stats().Contributions, snap.Rows(), snap.Index)
		}
		return nil
	})
}

// settle waits until every live node has applied the leader's last
// ownership batch. A write returns once the leader applied it, while a
// follower may still be applying a backlog (after a leadership change
// under load the source's node is such a follower), and its change ring
// moves on with every batch it applies.
func (c *cluster) settle() {
	c.t.Helper()
	want := c.nodes[c.leader()].FSM().Ownership().Last()
	waittest.UntilNil(c.t, 10*time.Second, "every node applied the leader's ownership", func() error {
		for i, n := range c.nodes {
			if got := n.FSM().Ownership().Last(); !c.down[i] && got < want {
				return fmt.Errorf("node %d at ownership index %d, the leader at %d", i, got, want)
			}
		}
		return nil
	})
}
