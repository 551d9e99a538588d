package inproc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/store"
)

// member is one node of the cluster with its disk and stores.
type member struct {
	id      string
	addr    raft.ServerAddress
	disk    *disk
	dataDir string // raft's snapshot store lives under it
	metrics *metrics.Metrics
	storage *metrics.Storage
	trans   *raft.InmemTransport
	// api names the member's cluster API (bufconn), which lis serves
	// while srv runs.
	api   string
	lis   atomic.Pointer[bufconn.Listener]
	srv   *grpc.Server
	logs  *store.LogStore
	fsm   *store.FSMStore
	state *consensus.StoreState
	node  *consensus.Node
	// live is node for the workload's goroutines, cleared before a stop.
	live    atomic.Pointer[consensus.Node]
	rebuilt bool // the last start set a corrupt FSM store aside
	// memberRebuilt is set when the last start found the raft log
	// corrupt and set the whole member aside (into aside on its disk);
	// rejoin then brings it back (rebuild_test.go).
	memberRebuilt bool
	aside         string
	rejoin        *rejoin
}

// cluster is n members over InmemTransport; cut holds the severed links.
type cluster struct {
	t       testing.TB
	members []*member
	peers   []consensus.Peer
	cut     map[[2]int]bool
	adjust  func(*consensus.Config)
	log     *slog.Logger
}

// newCluster starts n members and registers their shutdown.
func newCluster(t testing.TB, n int, adjust func(*consensus.Config)) *cluster {
	t.Helper()
	c := &cluster{t: t, cut: map[[2]int]bool{}, adjust: adjust, log: testLogger(t)}
	for i := range n {
		m := &member{id: fmt.Sprintf("n%d", i), addr: raft.ServerAddress(fmt.Sprintf("raft-%d", i)),
			disk: newDisk(), dataDir: t.TempDir(), api: fmt.Sprintf("api-%d", i)}
		c.members = append(c.members, m)
		c.peers = append(c.peers, consensus.Peer{ID: m.id, RaftAddr: string(m.addr), APIAddr: "passthrough:///" + m.api})
	}
	for i := range c.members {
		c.start(i)
	}
	t.Cleanup(c.close)
	return c
}

// testLogger logs warnings to the test output when KVRTEST_CHAOS_LOG is set.
func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("KVRTEST_CHAOS_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// snapshotSending adjusts the config of a scenario in which the leader
// sends an isolated member a snapshot once healed: a short log (64
// trailing entries), and a 200 ms lease. The scenario needs the leader
// to keep leading from the heal until it sent the snapshot: with the
// tier's 50 ms lease a scheduling stall on a loaded machine deposed it in
// between, and the third member, whose log was never compacted, sent
// entries instead.
func snapshotSending(cfg *consensus.Config) {
	cfg.TrailingLogs = 64
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
}

// config is a member's config with test-sized raft timeouts.
func (c *cluster) config(id string) consensus.Config {
	cfg := consensus.Config{
		NodeID: id, DC: "dc1", Bootstrap: true, Peers: c.peers,
		HeartbeatTimeout: 50 * time.Millisecond, ElectionTimeout: 50 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		ApplyTimeout: 500 * time.Millisecond, BarrierTimeout: 500 * time.Millisecond,
		ExpiryInterval: time.Hour, SnapshotThreshold: 1 << 30, TrailingLogs: 10240,
		Logger: c.log, DialOptions: []grpc.DialOption{grpc.WithContextDialer(c.dial)},
		Auth: consensus.Auth{JoinToken: joinToken},
	}
	if c.adjust != nil {
		c.adjust(&cfg)
	}
	return cfg
}

// joinToken is the members' operator credential for membership changes.
const joinToken = "chaos-join-token"

// dial connects to a running member's cluster API by its name.
func (c *cluster) dial(ctx context.Context, addr string) (net.Conn, error) {
	for _, m := range c.members {
		if m.api != addr {
			continue
		}
		if l := m.lis.Load(); l != nil {
			return l.DialContext(ctx)
		}
	}
	return nil, errors.New("chaos: " + addr + " is down")
}

// serveAPI starts member m's cluster API (status, join, leave).
func (c *cluster) serveAPI(m *member) {
	lis := bufconn.Listen(1 << 20)
	m.srv = grpc.NewServer(m.node.ServerOptions()...)
	m.node.RegisterAdmin(m.srv)
	srv := m.srv
	go func() { _ = srv.Serve(lis) }()
	m.lis.Store(lis)
}

// stopAPI stops member m's cluster API.
func (m *member) stopAPI() {
	if m.srv != nil {
		m.lis.Store(nil)
		m.srv.Stop()
		m.srv = nil
	}
}

// start opens member i's stores and starts its node; it fails the test
// when the node does not start.
func (c *cluster) start(i int) {
	c.t.Helper()
	if err := c.tryStart(i); err != nil {
		c.t.Fatalf("starting %s: %v", c.members[i].id, err)
	}
}

// tryStart is start returning the error (a refusal to start is a result
// some scenarios expect).
func (c *cluster) tryStart(i int) error {
	m := c.members[i]
	m.metrics = metrics.New()
	m.storage = m.metrics.Storage
	opts := func(dir string) store.Options {
		return store.Options{Dir: dir, FS: m.disk.fs(), Logger: c.log, MinFreeBytes: minFree, Observer: m.storage}
	}
	snaps, err := c.openLocal(m, opts)
	if err != nil {
		return err
	}
	cfg := c.config(m.id)
	cfg.DataDir, cfg.APIAddr = m.dataDir, "passthrough:///"+m.api
	if m.memberRebuilt {
		if err := c.forget(m); err != nil {
			m.stopRejoin()
			return c.abort(m, err)
		}
		cfg.Bootstrap = false // An empty member must not configure a cluster of its own.
	}
	_, m.trans = raft.NewInmemTransport(m.addr)
	m.node, err = consensus.New(cfg, consensus.Deps{Transport: m.trans, LogStore: m.logs, StableStore: m.logs,
		Snapshots: snaps, State: m.state, Metrics: m.metrics})
	if err != nil {
		m.stopRejoin()
		_ = m.trans.Close()
		m.trans = nil
		return c.abort(m, err)
	}
	c.serveAPI(m)
	m.live.Store(m.node)
	c.connect()
	if m.rejoin != nil {
		m.startRejoin()
	}
	return nil
}

// abort closes what a failed start opened.
func (c *cluster) abort(m *member, err error) error {
	if m.state != nil {
		m.state.Close()
	}
	if m.fsm != nil {
		_ = m.fsm.Close()
	}
	if m.logs != nil {
		_ = m.logs.Close()
	}
	m.logs, m.fsm, m.state = nil, nil, nil
	return err
}

// up reports whether member i runs.
func (c *cluster) up(i int) bool { return c.members[i].node != nil }

// stop shuts member i down and closes its stores (a clean stop; a crash
// is disk.powerLoss before stop).
func (c *cluster) stop(i int) {
	m := c.members[i]
	if m.node == nil {
		return
	}
	m.live.Store(nil)
	m.stopRejoin()
	m.stopAPI()
	_ = m.node.Shutdown()
	_ = m.trans.Close()
	m.state.Close()
	_ = m.fsm.Close()
	_ = m.logs.Close()
	m.node, m.trans, m.logs, m.fsm, m.state = nil, nil, nil, nil, nil
	c.connect()
}

// close stops every member: every raft first, then transports and stores.
func (c *cluster) close() {
	for _, m := range c.members {
		if m.node != nil {
			m.live.Store(nil)
			m.stopRejoin()
			m.stopAPI()
			_ = m.node.Shutdown()
		}
	}
	for i := range c.members {
		c.stop(i)
	}
}

// connect wires every pair of running members whose link is not cut.
func (c *cluster) connect() {
	for i, a := range c.members {
		if a.trans == nil {
			continue
		}
		for j, b := range c.members {
			switch {
			case i == j:
			case b.trans == nil || c.cut[link(i, j)]:
				a.trans.Disconnect(b.addr)
			default:
				a.trans.Connect(b.addr, b.trans)
			}
		}
	}
}

// link names the undirected link between i and j.
func link(i, j int) [2]int { return [2]int{min(i, j), max(i, j)} }

// isolate cuts every link of the members in ids.
func (c *cluster) isolate(ids ...int) {
	for _, i := range ids {
		for j := range c.members {
			if i != j {
				c.cut[link(i, j)] = true
			}
		}
	}
	c.connect()
}

// heal restores every link.
func (c *cluster) heal() {
	c.cut = map[[2]int]bool{}
	c.connect()
}

// leader returns the ready leader, or -1 when none is ready now.
func (c *cluster) leader() int {
	for i, m := range c.members {
		if m.node != nil && m.node.Ready() {
			return i
		}
	}
	return -1
}

// waitLeader waits up to d for a ready leader among the members in among
// (every member when empty).
func (c *cluster) waitLeader(d time.Duration, among ...int) int {
	c.t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if l := c.leader(); l >= 0 && (len(among) == 0 || contains(among, l)) {
			return l
		}
	}
	c.t.Fatalf("no ready leader among %v within %v", among, d)
	return -1
}

// follower returns a running member other than the ones in not.
func (c *cluster) follower(not ...int) int {
	for i := range c.members {
		if c.up(i) && !contains(not, i) {
			return i
		}
	}
	return -1
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// settle ends a scenario's load: it lets the load run for after (under
// phase's scaling), stops it, records in rep the time to converge and the
// unavailability window since fault, and returns the history.
func (c *cluster) settle(t *testing.T, w *workload, rep *report, fault time.Time, after time.Duration) []op {
	t.Helper()
	time.Sleep(phase(t, after))
	w.stopLoad()
	rep.Converge = ms(c.converge(10 * time.Second))
	ops := w.history()
	rep.Unavail = ms(unavailability(ops, fault))
	return ops
}

// sample calls f every interval on its own goroutine until the returned
// stop is called, and stop waits for it. The test's end calls stop too:
// registered after the cluster's, that cleanup runs first, so a sampler
// of a member's state never outlives a failed wait into the members'
// shutdown.
func sample(t testing.TB, every time.Duration, f func()) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
			}
			f()
			time.Sleep(every)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(quit); <-done }) }
	t.Cleanup(stop)
	return stop
}

// outrun waits, while a load runs, until leader l applied more than
// trailing entries past the isolated member f's last log entry. Raft
// compacts a snapshot's log down to TrailingLogs entries behind its
// head, so a snapshot the leader takes then has dropped entries f lacks:
// f can only catch up by InstallSnapshot.
func (c *cluster) outrun(l, f int, trailing uint64) {
	c.t.Helper()
	last := c.members[f].node.Raft().LastIndex()
	waittest.UntilNil(c.t, 30*time.Second, fmt.Sprintf("the leader applied %d entries past the isolated member's last", trailing), func() error {
		if applied := c.members[l].node.Raft().AppliedIndex(); applied <= last+trailing {
			return fmt.Errorf("leader applied %d, isolated member's last entry %d", applied, last)
		}
		return nil
	})
}

// converge waits until every running member applied the leader's commit
// index with one state hash, and returns the time it took.
func (c *cluster) converge(d time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < d {
		ok, desc := c.converged()
		if ok {
			return time.Since(start)
		}
		last = desc
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("members did not converge within %v: %s", d, last)
	return 0
}

// converged reports whether the running members agree, with a description
// of their states.
func (c *cluster) converged() (bool, string) {
	l := c.leader()
	if l < 0 {
		return false, "no ready leader"
	}
	commit := c.members[l].node.Raft().CommitIndex()
	var desc string
	var h0 uint64
	same, first := true, true
	for _, m := range c.members {
		if m.node == nil {
			continue
		}
		idx, h := m.node.FSM().StateHash()
		desc += fmt.Sprintf("%s:(applied %d, raft %d, hash %x) ", m.id, idx, m.node.Raft().AppliedIndex(), h)
		if first {
			h0, first = h, false
		}
		same = same && h == h0 && m.node.Raft().AppliedIndex() >= commit
	}
	return same, desc + fmt.Sprintf("commit %d", commit)
}

// snapshotDirs lists member i's snapshot directories, newest first.
func (c *cluster) snapshotDirs(i int) []string {
	snaps, err := raft.NewFileSnapshotStoreWithLogger(c.members[i].dataDir, 2, hclog.NewNullLogger())
	if err != nil {
		c.t.Fatal(err)
	}
	metas, err := snaps.List()
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, m := range metas {
		out = append(out, filepath.Join(c.members[i].dataDir, "snapshots", m.ID))
	}
	return out
}
