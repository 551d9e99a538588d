package store

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/internal/waittest"
)

// cursorFSM is a minimal FSM on FSMStore: each entry advances cursor (1, 0)
// to the entry's index, committed with the index.
type cursorFSM struct{ s *FSMStore }

// Apply commits one entry.
func (f cursorFSM) Apply(l *raft.Log) any {
	b := f.s.NewBatch()
	b.PutCursor(1, 0, l.Index)
	return b.Commit(l.Index, l.Term)
}

// Snapshot hands raft a store snapshot.
func (f cursorFSM) Snapshot() (raft.FSMSnapshot, error) { return f.s.Snapshot() }

// Restore loads a snapshot stream.
func (f cursorFSM) Restore(rc io.ReadCloser) error {
	return errors.Join(f.s.Restore(rc), rc.Close())
}

// raftNode is one member of the smoke-test cluster.
type raftNode struct {
	r     *raft.Raft
	trans *raft.InmemTransport
	logs  *LogStore
	fsm   *FSMStore
}

// newRaftNode builds node i on its own MemFS.
func newRaftNode(t *testing.T, i int) *raftNode {
	fs := vfs.NewMem()
	logs, err := OpenLogStore(memOpts(fs, "raft"))
	if err != nil {
		t.Fatal(err)
	}
	fsm, err := OpenFSM(memOpts(fs, "fsm"))
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprint("n", i)))
	return &raftNode{trans: trans, logs: logs, fsm: fsm}
}

// raftConfig is a fast configuration for an in-memory cluster.
func raftConfig(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = 50 * time.Millisecond
	c.ElectionTimeout = 50 * time.Millisecond
	c.LeaderLeaseTimeout = 50 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.Logger = hclog.NewNullLogger()
	return c
}

// startCluster connects and starts three nodes, bootstrapping the first.
func startCluster(t *testing.T) []*raftNode {
	nodes := []*raftNode{newRaftNode(t, 0), newRaftNode(t, 1), newRaftNode(t, 2)}
	var servers []raft.Server
	for i, a := range nodes {
		for _, b := range nodes {
			a.trans.Connect(b.trans.LocalAddr(), b.trans)
		}
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprint(i)), Address: a.trans.LocalAddr()})
	}
	for i, n := range nodes {
		conf := raftConfig(raft.ServerID(fmt.Sprint(i)))
		if i == 0 {
			err := raft.BootstrapCluster(conf, n.logs, n.logs, raft.NewInmemSnapshotStore(), n.trans,
				raft.Configuration{Servers: servers})
			if err != nil {
				t.Fatal(err)
			}
		}
		r, err := raft.NewRaft(conf, cursorFSM{n.fsm}, n.logs, n.logs, raft.NewInmemSnapshotStore(), n.trans)
		if err != nil {
			t.Fatal(err)
		}
		n.r = r
	}
	return nodes
}

// stopCluster shuts down every raft first, then the transports, then the
// stores, the order that leaves no goroutine behind.
func stopCluster(t *testing.T, nodes []*raftNode) {
	for _, n := range nodes {
		if n.r != nil {
			if err := n.r.Shutdown().Error(); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		}
	}
	for _, n := range nodes {
		_ = n.trans.Close()
	}
	for _, n := range nodes {
		if err := errors.Join(n.logs.Close(), n.fsm.Close()); err != nil {
			t.Errorf("close stores: %v", err)
		}
	}
}

// waitFor polls cond; ten seconds is its failure bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waittest.Until(t, 10*time.Second, what, cond)
}

func TestRaftThreeNodesOnPebble(t *testing.T) {
	nodes := startCluster(t)
	defer stopCluster(t, nodes)
	var leader *raft.Raft
	waitFor(t, "a leader", func() bool {
		for _, n := range nodes {
			if n.r.State() == raft.Leader {
				leader = n.r
				return true
			}
		}
		return false
	})
	var last uint64
	for i := range 20 {
		f := leader.Apply([]byte{byte(i)}, time.Second)
		if err := f.Error(); err != nil {
			t.Fatalf("Apply %d: %v", i, err)
		}
		if err, _ := f.Response().(error); err != nil {
			t.Fatalf("FSM apply %d: %v", i, err)
		}
		last = f.Index()
	}
	if err := leader.Snapshot().Error(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	for i, n := range nodes {
		waitFor(t, fmt.Sprint("node ", i, " to apply"), func() bool {
			c, err := n.fsm.Cursor(1, 0)
			return err == nil && c == last
		})
		if idx, _, _ := n.fsm.Applied(); idx != last {
			t.Fatalf("node %d applied %d, want %d", i, idx, last)
		}
		if li, _ := n.logs.LastIndex(); li < last {
			t.Fatalf("node %d log ends at %d, before %d", i, li, last)
		}
	}
}
