package consensus

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/store"
)

// durableCluster is n nodes whose raft logs and FSM tables live in Pebble
// stores on one in-memory file system, so they can be shut down together
// and restarted from what they stored. Snapshot stores are kept across
// restarts, as a data directory would be.
type durableCluster struct {
	t      *testing.T
	fs     vfs.FS
	clock  *fakeClock
	snaps  []raft.SnapshotStore
	nodes  []*Node
	trans  []*raft.InmemTransport
	logs   []*store.LogStore
	fsms   []*store.FSMStore
	states []*StoreState
}

func newDurableCluster(t *testing.T, n int) *durableCluster {
	c := &durableCluster{t: t, fs: vfs.NewMem(), clock: newFakeClock()}
	for range n {
		c.snaps = append(c.snaps, raft.NewInmemSnapshotStore())
	}
	c.start()
	t.Cleanup(c.stop)
	return c
}

// start opens every node's stores and starts the nodes.
func (c *durableCluster) start() {
	opts := func(dir string) store.Options {
		return store.Options{Dir: dir, FS: c.fs, Logger: slog.New(slog.DiscardHandler)}
	}
	var peers []Peer
	for i := range c.snaps {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("raft-%d", i)))
		c.trans = append(c.trans, tr)
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: string(addr), APIAddr: "passthrough:///none"})
	}
	for i := range c.trans {
		for j := range c.trans {
			if i != j {
				c.trans[i].Connect(c.trans[j].LocalAddr(), c.trans[j])
			}
		}
	}
	for i := range c.snaps {
		ls, err := store.OpenLogStore(opts(fmt.Sprintf("n%d/raft", i)))
		c.check(err)
		c.logs = append(c.logs, ls)
		fs, err := store.OpenFSM(opts(fmt.Sprintf("n%d/fsm", i)))
		c.check(err)
		c.fsms = append(c.fsms, fs)
		st, err := OpenStoreState(fs)
		c.check(err)
		c.states = append(c.states, st)
		cfg := fastConfig(peers[i].ID, c.clock)
		cfg.Peers = peers
		node, err := New(cfg, Deps{Transport: c.trans[i], LogStore: ls, StableStore: ls, Snapshots: c.snaps[i], State: st})
		c.check(err)
		c.nodes = append(c.nodes, node)
	}
}

// check fails the test on err.
func (c *durableCluster) check(err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
}

// stop shuts every node down, then closes transports and stores.
func (c *durableCluster) stop() {
	for _, n := range c.nodes {
		_ = n.Shutdown()
	}
	for _, tr := range c.trans {
		_ = tr.Close()
	}
	for i := range c.logs {
		c.states[i].Close()
		c.check(c.fsms[i].Close())
		c.check(c.logs[i].Close())
	}
	c.nodes, c.trans, c.logs, c.fsms, c.states = nil, nil, nil, nil, nil
}

// leader waits for a ready leader.
func (c *durableCluster) leader() *Node {
	c.t.Helper()
	var l *Node
	waittest.Until(c.t, 10*time.Second, "a node is a ready leader", func() bool {
		for _, n := range c.nodes {
			if n.Ready() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

// converge waits until every node's raft applied the leader's commit
// index (entries the FSM never sees, like barriers, included) with one
// state hash.
func (c *durableCluster) converge(l *Node) uint64 {
	c.t.Helper()
	var h0 uint64
	waittest.UntilNil(c.t, 10*time.Second, "every node applied the leader's commit index with one state hash", func() error {
		var i0 uint64
		i0, h0 = c.nodes[0].FSM().StateHash()
		same := true
		var got []string
		for _, n := range c.nodes {
			i, h := n.FSM().StateHash()
			same = same && i == i0 && h == h0 && n.Raft().AppliedIndex() >= l.Raft().CommitIndex()
			got = append(got, fmt.Sprintf("%s: (%d, %x)", n.ID(), i, h))
		}
		if !same {
			return fmt.Errorf("commit index %d: %v", l.Raft().CommitIndex(), got)
		}
		return nil
	})
	return h0
}

func TestDurableClusterRestartKeepsAcknowledgedBinds(t *testing.T) {
	c := newDurableCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := c.leader()
	const binds = 20
	for i := range binds {
		r, err := l.Apply(ctx, bindCmd(fmt.Sprintf("s%d", i), uint64(i+1), 0, 0, fmt.Sprintf("r%d", i)))
		if err != nil || !r.Won {
			t.Fatalf("bind %d: %v, %v", i, r, err)
		}
		if i == binds/2 {
			c.check(l.Raft().Snapshot().Error())
		}
	}
	before := c.converge(l)
	c.stop()

	c.start()
	l = c.leader()
	if after := c.converge(l); after != before {
		r, err := l.Apply(ctx, bindCmd("probe", 1, 0, 0, ""))
		t.Fatalf("state hash %x after restart, want %x (probe %v %v)", after, before, r, err)
	}
	for _, n := range c.nodes {
		for i := range binds {
			b, ok := n.FSM().Session(fmt.Sprintf("s%d", i))
			if !ok || b.WorkerId != uint64(i+1) {
				t.Fatalf("node %s lost bind s%d: %v", n.ID(), i, b)
			}
		}
	}
	r, err := l.Apply(ctx, bindCmd("s0", 99, 0, 0, "r0"))
	if err != nil || !r.Won || r.Binding.WorkerId != 1 {
		t.Fatalf("retried request after restart: %v, %v", r, err)
	}
}
