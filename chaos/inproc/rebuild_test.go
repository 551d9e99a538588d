package inproc

import (
	"context"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/store"
)

// rejoin is a rebuilt member's rejoin in progress.
type rejoin struct {
	r      consensus.Rejoiner
	conns  []*grpc.ClientConn
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// openLocal opens member m's stores and checks its raft log, as a node
// does: a corrupt log sets the member's state aside (on both its disks)
// and opens fresh stores; m.memberRebuilt is then set.
func (c *cluster) openLocal(m *member, opts func(string) store.Options) (raft.SnapshotStore, error) {
	m.memberRebuilt = false
	snaps, err := c.openStores(m, opts)
	if err == nil || !consensus.IsCorrupt(err) {
		return snaps, err
	}
	now := time.Now()
	if m.aside, err = consensus.SetAside(m.disk.mem, "", []string{"raft", "fsm"}, now); err != nil {
		return nil, err
	}
	if _, err = consensus.SetAside(vfs.Default, m.dataDir, []string{"snapshots"}, now); err != nil {
		return nil, err
	}
	metrics.NewRebuilds(m.metrics.Registerer()).Rebuilt("member")
	m.memberRebuilt = true
	return c.openStores(m, opts)
}

// openStores opens member m's raft log, FSM tables and snapshots and
// checks the log; on an error it closes what it opened.
func (c *cluster) openStores(m *member, opts func(string) store.Options) (raft.SnapshotStore, error) {
	var err error
	if m.logs, err = store.OpenLogStore(opts("raft")); err != nil {
		m.logs = nil
		return nil, err
	}
	if m.fsm, m.state, m.rebuilt, err = consensus.OpenDurableState(opts("fsm"), c.log); err != nil {
		return nil, c.abort(m, err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(m.dataDir, 2, hclog.NewNullLogger())
	if err != nil {
		return nil, c.abort(m, err)
	}
	idx, err := consensus.NewestSnapshotIndex(snaps)
	if err == nil {
		err = consensus.CheckLog(m.logs, m.logs, idx, m.state.Applied())
	}
	if err == nil {
		err = consensus.CheckSnapshotChain(snaps, m.logs)
	}
	if err != nil {
		return nil, c.abort(m, err)
	}
	return snaps, nil
}

// forget has the other members drop m's old entry before m's raft runs
// on its empty stores.
func (c *cluster) forget(m *member) error {
	rj := &rejoin{done: make(chan struct{})}
	rj.r = consensus.Rejoiner{Token: joinToken, DC: "dc1", Retry: 20 * time.Millisecond, Log: c.log,
		Self: consensus.Peer{ID: m.id, RaftAddr: string(m.addr), APIAddr: "passthrough:///" + m.api}}
	for _, o := range c.members {
		if o == m {
			continue
		}
		conn, err := grpc.NewClient("passthrough:///"+o.api, grpc.WithContextDialer(c.dial),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		rj.conns = append(rj.conns, conn)
		rj.r.Admins = append(rj.r.Admins, kvrpb.NewClusterAdminClient(conn))
	}
	m.rejoin = rj
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return rj.r.Forget(ctx)
}

// startRejoin adds the rebuilt member back (nonvoter, then voter once
// caught up) in the background; stopRejoin ends it.
func (m *member) startRejoin() {
	rj := m.rejoin
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	rj.cancel = cancel
	node := m.node
	go func() {
		defer close(rj.done)
		rj.err = rj.r.Rejoin(ctx, node)
	}()
}

// stopRejoin stops a rejoin in progress and closes its clients.
func (m *member) stopRejoin() {
	rj := m.rejoin
	if rj == nil {
		return
	}
	m.rejoin = nil
	if rj.cancel != nil {
		rj.cancel()
		<-rj.done
	}
	for _, conn := range rj.conns {
		_ = conn.Close()
	}
}
