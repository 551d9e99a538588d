package consensus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/routing/index"
)

// Deps are a Node's pluggable parts. Nil fields get in-memory defaults
// (and a TCP transport on Config.RaftAddr), which suit tests and a
// single-process demo; a persistent node passes the Pebble stores.
// A State that is a StoreState makes the node resume from it on restart
// (see the package doc); the caller closes its store after Shutdown.
type Deps struct {
	Transport   raft.Transport
	LogStore    raft.LogStore
	StableStore raft.StableStore
	Snapshots   raft.SnapshotStore
	State       State
	Index       *index.Exact
	// Metrics is the node's metric set, where the FSM counts index
	// errors; nil counts nothing.
	Metrics *metrics.Metrics
}

// Node is one router node's member of its DC's raft cluster: the raft
// instance, the FSM, the write path (Apply), leader forwarding, the
// leadership barrier and readiness, and the leader's expiry loop.
//
// Concurrency: all methods are safe for concurrent use. Shutdown stops
// every goroutine the node started.
type Node struct {
	cfg       Config
	log       *slog.Logger
	raft      *raft.Raft
	fsm       *FSM
	trans     raft.Transport
	ownsTrans bool

	ready    atomic.Bool
	caughtUp atomic.Bool // sticky; see CaughtUp
	// leaderApplied is the applied index the first ready leader reported
	// to this node since it started (catchup.go).
	leaderApplied atomic.Uint64
	epoch         atomic.Uint64 // see LeaderEpoch
	stop          chan struct{}
	wg            sync.WaitGroup
	// closing, under propMu, stops new local proposals once Shutdown has
	// begun, so that its barrier comes after every entry this node
	// proposed; down is closed when raft has shut down, and releases
	// whoever still waits on a future raft abandoned (flushApplies).
	propMu  sync.RWMutex
	closing bool
	down    chan struct{}

	// sec counts refused calls and events; nil counts nothing.
	sec *metrics.Security
	// health watches the stores for a full disk (storage.go).
	health storageHealth
	// leaderChange fires when the node's view of the leader changes
	// (leaderchange.go).
	leaderChange *leaderSignal

	mu     sync.Mutex
	apis   map[raft.ServerID]string
	conns  map[string]*grpc.ClientConn
	closed bool
}

// New validates cfg, builds the raft instance and starts the node's
// leadership watcher. With cfg.Bootstrap it bootstraps the cluster from
// cfg.Peers when the stores are empty.
func New(cfg Config, deps Deps) (*Node, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DataDir != "" && (deps.LogStore == nil || deps.StableStore == nil) {
		return nil, configError("data_dir: a persistent node needs a log store and a stable store")
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID), stop: make(chan struct{}), down: make(chan struct{}),
		leaderChange: newLeaderSignal(), apis: map[raft.ServerID]string{}, conns: map[string]*grpc.ClientConn{}}
	for _, p := range cfg.Peers {
		n.apis[raft.ServerID(p.ID)] = p.APIAddr
	}
	if err := n.fillDeps(&deps); err != nil {
		return nil, err
	}
	n.health = newStorageHealth(deps)
	if err := n.checkSnapshots(deps.Snapshots, deps.LogStore); err != nil {
		n.closeTransport()
		return nil, err
	}
	deps.Snapshots = &checkedSnapshots{SnapshotStore: deps.Snapshots, n: n}
	n.fsm = NewFSM(deps.State, deps.Index, n.log)
	n.fsm.metrics = deps.Metrics
	n.sec = deps.Metrics.Sec()
	rc := cfg.raftConfig()
	if n.fsm.durable != nil {
		if err := n.fsm.restoreNewer(deps.Snapshots); err != nil {
			n.closeTransport()
			return nil, err
		}
		rc.NoSnapshotRestoreOnStart = true
	}
	r, err := raft.NewRaft(rc, n.fsm, deps.LogStore, deps.StableStore, deps.Snapshots, &heartbeatGate{Transport: deps.Transport})
	if err != nil {
		n.closeTransport()
		return nil, fmt.Errorf("consensus: starting raft: %w", err)
	}
	n.raft = r
	if cfg.Bootstrap {
		if err := n.bootstrap(); err != nil {
			_ = n.Shutdown()
			return nil, err
		}
	}
	n.wg.Add(4)
	go n.watchLeadership()
	go n.watchDisk()
	go n.watchCatchUp()
	go n.watchLeaderChanges()
	return n, nil
}

// fillDeps supplies the in-memory and TCP defaults.
func (n *Node) fillDeps(d *Deps) error {
	if d.LogStore == nil && d.StableStore == nil {
		s := raft.NewInmemStore()
		d.LogStore, d.StableStore = s, s
	}
	if d.Snapshots == nil {
		if n.cfg.DataDir == "" {
			d.Snapshots = raft.NewInmemSnapshotStore()
		} else {
			s, err := raft.NewFileSnapshotStore(n.cfg.DataDir, 2, nil)
			if err != nil {
				return fmt.Errorf("consensus: snapshot store in %s: %w", n.cfg.DataDir, err)
			}
			d.Snapshots = s
		}
	}
	if d.Transport == nil {
		t, err := raft.NewTCPTransportWithConfig(n.cfg.RaftAddr, nil, transportConfig(nil, 3, n.cfg.ApplyTimeout, newHclogAdapter(n.log, n.cfg.NodeID)))
		if err != nil {
			return fmt.Errorf("consensus: raft transport on %s: %w", n.cfg.RaftAddr, err)
		}
		d.Transport, n.ownsTrans = t, true
	}
	n.trans = d.Transport
	return nil
}

// FSM returns the node's state machine, for local reads.
func (n *Node) FSM() *FSM { return n.fsm }

// Raft returns the raft instance, for admin and tests.
func (n *Node) Raft() *raft.Raft { return n.raft }

// ID returns the node's server id.
func (n *Node) ID() string { return n.cfg.NodeID }

// IsLeader reports whether the node is the raft leader now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Ready reports whether the node leads and has passed its barrier, so it
// serves binds.
func (n *Node) Ready() bool { return n.ready.Load() }

// Shutdown stops the leadership watcher, then raft, then closes the
// forwarding connections and, when the node built it, the transport. In a
// multi-node process shut every raft down before closing transports
// shared with peers (see the package doc).
func (n *Node) Shutdown() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	close(n.stop)
	n.wg.Wait()
	n.propMu.Lock()
	n.closing = true
	n.propMu.Unlock()
	n.flushApplies()
	err := n.raft.Shutdown().Error()
	close(n.down)
	n.mu.Lock()
	for addr, cc := range n.conns {
		err = errors.Join(err, cc.Close())
		delete(n.conns, addr)
	}
	n.mu.Unlock()
	n.closeTransport()
	return err
}

// shutdownBarrierTimeout bounds the wait for the barrier of flushApplies
// to be enqueued; the barrier itself resolves once applied, or when the
// leader loses its lease.
const shutdownBarrierTimeout = time.Second

// flushApplies has a leader apply everything it committed before raft
// shuts down. Raft's Shutdown abandons committed entries still queued for
// the FSM, and the Apply futures of those entries never resolve
// (hashicorp/raft#498): a caller waiting on one, such as a forwarded
// proposal's RPC handler, would block forever. A barrier is applied after
// every entry before it, so once it resolves every future this node handed
// out has resolved too: Shutdown stops new proposals before it. Entries
// not yet committed resolve on their own when the leader loop ends
// (ErrLeadershipLost). If the barrier fails (leadership lost, or not
// enqueued in time), a future may still be abandoned; its waiter is
// released when raft is down (await) with ErrIndeterminate.
func (n *Node) flushApplies() {
	if n.raft.State() != raft.Leader {
		return
	}
	if err := n.raft.Barrier(shutdownBarrierTimeout).Error(); err != nil {
		n.log.Debug("barrier before shutdown", "err", err)
	}
}

// closeTransport closes a transport the node built: streams first, so the
// peers' connection handlers end.
func (n *Node) closeTransport() {
	if !n.ownsTrans {
		return
	}
	if nt, ok := n.trans.(*raft.NetworkTransport); ok {
		nt.CloseStreams()
	}
	if c, ok := n.trans.(raft.WithClose); ok {
		_ = c.Close()
	}
}

// heartbeatGate is the transport raft runs on: deps.Transport, whose
// heartbeat handler runs under a read lock that the gate's Close (called
// by raft's Shutdown once raft's own goroutines ended) takes to drop
// every later heartbeat. hashicorp/raft calls that handler on the
// transport's connection goroutine, not on its own: one that passed raft's
// shutdown check just before Shutdown could still be writing the current
// term when the owner closed the stable store after Shutdown, and raft
// panics on a failed term write. Once Close returned, no raft code runs
// on the transport's goroutines. The transports kvrouter runs on
// (NetworkTransport, InmemTransport) support pre-vote, which the gate
// forwards.
type heartbeatGate struct {
	raft.Transport
	mu     sync.RWMutex
	closed bool
}

func (g *heartbeatGate) SetHeartbeatHandler(cb func(raft.RPC)) {
	if cb == nil {
		g.Transport.SetHeartbeatHandler(nil)
		return
	}
	g.Transport.SetHeartbeatHandler(func(rpc raft.RPC) {
		g.mu.RLock()
		defer g.mu.RUnlock()
		if g.closed {
			rpc.Respond(nil, raft.ErrRaftShutdown)
			return
		}
		cb(rpc)
	})
}

func (g *heartbeatGate) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	p, ok := g.Transport.(raft.WithPreVote)
	if !ok {
		return fmt.Errorf("consensus: transport %T has no pre-vote", g.Transport)
	}
	return p.RequestPreVote(id, target, args, resp)
}

// Close waits for the heartbeats being handled, drops later ones, and
// closes the transport when it can be closed.
func (g *heartbeatGate) Close() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	if c, ok := g.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// watchLeadership follows raft.LeaderCh: on gaining leadership it starts
// the leader loop (barrier, then readiness and expiry); on losing it, it
// resets readiness and stops the loop.
func (n *Node) watchLeadership() {
	defer n.wg.Done()
	var run *leaderRun
	defer func() { run.stop(n) }()
	for {
		select {
		case <-n.stop:
			return
		case leader := <-n.raft.LeaderCh():
			run.stop(n)
			run = nil
			if !leader {
				n.log.Info("lost leadership")
				continue
			}
			run = n.startLeader()
		}
	}
}

// leaderRun is one term's leader loop.
type leaderRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startLeader starts the leader loop.
func (n *Node) startLeader() *leaderRun {
	ctx, cancel := context.WithCancel(context.Background())
	r := &leaderRun{cancel: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); n.leaderLoop(ctx) }()
	return r
}

// stop resets readiness and ends the loop, waiting for it; nil is a no-op
// beyond the reset.
func (r *leaderRun) stop(n *Node) {
	if r != nil {
		r.cancel()
		<-r.done
	}
	// The reset comes after the loop ended, so the loop cannot set
	// readiness again behind it.
	n.ready.Store(false)
}
