package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvrouter/kvrouter/fleet/natsbus"
	"github.com/kvrouter/kvrouter/internal/freeport"
	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/mtls/mtlstest"
	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/mocker/server"
	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// freeAddr returns a free loopback address below the ephemeral port
// range, so that a member restarting on it can bind it again (see
// internal/freeport).
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// dcCluster is three router nodes of one DC in raft, sharing one NATS
// server with three engines, all in this process on loopback.
type dcCluster struct {
	t      *testing.T
	url    string
	cfgs   []node.Config
	nodes  []*node.Node
	stops  []context.CancelFunc
	dones  []chan struct{}
	engCtx context.Context
	engStp map[uint64]context.CancelFunc
	wg     sync.WaitGroup
}

func startDCCluster(t *testing.T, engines int, tweaks ...func(*node.Config)) *dcCluster {
	t.Helper()
	bus, err := natsbus.Open(natsbus.Config{URL: natsbus.Embedded, EmbeddedAddr: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &dcCluster{t: t, url: bus.URL(), engStp: map[uint64]context.CancelFunc{}}
	ectx, cancel := context.WithCancel(context.Background())
	c.engCtx = ectx
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
		cancel()
		c.wg.Wait()
		bus.Close()
	})
	var peers []string
	for i := range 3 {
		cfg := node.DefaultConfig()
		cfg.NodeID = fmt.Sprintf("n%d", i+1)
		cfg.HTTPAddr, cfg.NATS = freeAddr(t), c.url
		cfg.Dispatch.AffinityTTL = time.Minute
		cc := &cfg.Cluster
		cc.RaftAddr, cc.APIAddr, cc.DataDir = freeAddr(t), freeAddr(t), t.TempDir()
		cc.Bootstrap = true
		for _, tw := range tweaks {
			tw(&cfg)
		}
		peers = append(peers, fmt.Sprintf("%s=%s/%s", cfg.NodeID, cc.RaftAddr, cc.APIAddr))
		c.cfgs = append(c.cfgs, cfg)
	}
	c.nodes, c.stops, c.dones = make([]*node.Node, 3), make([]context.CancelFunc, 3), make([]chan struct{}, 3)
	for i := range c.cfgs {
		c.cfgs[i].Cluster.Peers = peers
		c.start(i)
	}
	for id := range engines {
		c.startEngine(uint64(id + 1))
	}
	for i := range c.nodes {
		c.waitReady(i)
	}
	return c
}

// start runs node i (again), on its data directory.
func (c *dcCluster) start(i int) {
	c.t.Helper()
	n, err := node.New(c.cfgs[i], testLogger())
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c.nodes[i], c.stops[i], c.dones[i] = n, cancel, done
	go func() {
		defer close(done)
		if err := n.Run(ctx); err != nil {
			c.t.Errorf("node %d: %v", i, err)
		}
	}()
	// Run ending first (say, a port taken since freeAddr) ends the wait
	// with its error; the deadline catches a node that never listens.
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := n.WaitReady(wctx); err != nil {
		c.t.Fatalf("node %d: %v", i, err)
	}
}

// stop stops node i and waits for it.
func (c *dcCluster) stop(i int) {
	if c.stops[i] != nil {
		c.stops[i]()
		<-c.dones[i]
		c.stops[i] = nil
	}
}

func (c *dcCluster) startEngine(id uint64) {
	c.t.Helper()
	log := slog.New(slog.DiscardHandler)
	bus, err := natsbus.Open(natsbus.Config{URL: c.url}, log)
	if err != nil {
		c.t.Fatal(err)
	}
	srv, err := server.New(server.Config{EngineID: id, HeartbeatInterval: 100 * time.Millisecond,
		Engine: mocker.Config{SpeedUp: 100, BlockSize: 16}}, bus.Conn, log)
	if err != nil {
		c.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(c.engCtx)
	c.engStp[id] = cancel
	c.wg.Go(func() {
		defer bus.Close()
		if err := srv.Serve(ctx, ln); err != nil && ctx.Err() == nil {
			c.t.Errorf("engine %d: %v", id, err)
		}
	})
}

// waitReady waits until node i answers /ready with 200.
func (c *dcCluster) waitReady(i int) {
	c.t.Helper()
	waittest.UntilNil(c.t, 30*time.Second, fmt.Sprintf("node %d answers /ready with 200", i), func() error {
		resp, err := http.Get("http://" + c.nodes[i].Addr().String() + "/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

func (c *dcCluster) leader() int {
	for i, n := range c.nodes {
		if c.stops[i] != nil && n.Cluster() != nil && n.Cluster().IsLeader() {
			return i
		}
	}
	return -1
}

// complete sends a completion to node i and returns the serving engine.
func (c *dcCluster) complete(i int, session string, tokens []int) string {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": tokens, "max_tokens": 2})
	req, _ := http.NewRequest("POST", "http://"+c.nodes[i].Addr().String()+"/v1/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("X-Session-ID", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		c.t.Fatalf("node %d: status %d: %s", i, resp.StatusCode, b)
	}
	return resp.Header.Get("X-Kvrouter-Worker")
}

// indexesAgree reports whether every running node's FSM holds blocks and
// all report the same state hash at the same applied index.
func (c *dcCluster) indexesAgree() bool {
	for _, n := range c.nodes {
		if cn := n.Cluster(); cn == nil || cn.FSM().Index().Stats().Pairs == 0 {
			return false
		}
	}
	return c.statesEqual()
}

// statesEqual reports whether every running node reports the same state
// hash at the same applied index.
func (c *dcCluster) statesEqual() bool {
	var idx0, h0 uint64
	for i, n := range c.nodes {
		cn := n.Cluster()
		if c.stops[i] == nil || cn == nil {
			return false
		}
		idx, h := cn.FSM().StateHash()
		if i == 0 {
			idx0, h0 = idx, h
		} else if idx != idx0 || h != h0 {
			return false
		}
	}
	return true
}

// idle reports, as an error naming the first exception, whether every
// running node sees every engine idle: no load booked by the node itself
// (a request's booking ends when the node's handler calls Done, which
// may be just after the client read the answer) and none reported by
// the engine's last heartbeat.
func (c *dcCluster) idle() error {
	for i, n := range c.nodes {
		if c.stops[i] == nil {
			continue
		}
		reg := n.EngineRegistry()
		if reg == nil {
			return fmt.Errorf("n%d has no engine registry yet", i+1)
		}
		for _, e := range reg.Engines() {
			for r, l := range e.Loads {
				if l != (routing.Load{}) {
					return fmt.Errorf("n%d: engine %d rank %d reports %+v", i+1, e.ID, r, l)
				}
			}
		}
		mfs, err := n.Metrics().Registry.Gather()
		if err != nil {
			return err
		}
		for _, mf := range mfs {
			if !strings.HasPrefix(mf.GetName(), "kvrouter_worker_active_") {
				continue
			}
			for _, m := range mf.GetMetric() {
				if v := m.GetGauge().GetValue(); v != 0 {
					return fmt.Errorf("n%d: %s %v = %v", i+1, mf.GetName(), m.GetLabel(), v)
				}
			}
		}
	}
	return nil
}

func tokens(seed, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (seed*7919 + i*31) % 32000
	}
	return out
}

// TestClusterRoutesFromReplicatedState checks that KV events ingested by
// the leader reach every node's index through raft (a prefix cached by a
// request through one node draws its sibling to the same engine through
// another), and that session bindings are the cluster's: a session bound
// through one node is served by the same engine through every node, also
// after the leader stops and after it restarts from its data directory.
func TestClusterRoutesFromReplicatedState(t *testing.T) {
	if testing.Short() {
		t.Skip("three raft nodes and engines; run without -short")
	}
	c := startDCCluster(t, 3)
	exerciseCluster(t, c)
}

// exerciseCluster runs the replicated-state checks of
// TestClusterRoutesFromReplicatedState on a started cluster.
func exerciseCluster(t *testing.T, c *dcCluster) {
	t.Helper()
	prompt := tokens(1, 256)
	first := c.complete(0, "", prompt)
	// The leader ingests the engine's KV events and every node applies
	// them from the log: wait until the three indexes hold blocks and
	// agree, then the sibling goes to the caching engine through each.
	waittest.Until(t, 10*time.Second, "the nodes' indexes hold blocks and agree", c.indexesAgree)
	for i := range 3 {
		// A busy-looking caching engine may rightly lose to an idle one:
		// wait until every node sees the previous request done.
		waittest.UntilNil(t, 10*time.Second, "every node sees every engine idle", c.idle)
		sibling := append(append([]int(nil), prompt...), tokens(2+i, 32)...)
		if got := c.complete(i, "", sibling); got != first {
			t.Fatalf("sibling through n%d went to %s, prefix cached on %s", i+1, got, first)
		}
	}

	sessions := map[string]string{}
	for s := range 12 {
		id := fmt.Sprintf("sess-%d", s)
		sessions[id] = c.complete(s%3, id, tokens(100+s, 64))
	}
	check := func(stage string, nodes ...int) {
		t.Helper()
		for id, want := range sessions {
			for _, i := range nodes {
				if got := c.complete(i, id, tokens(999, 64)); got != want {
					t.Fatalf("%s: session %s through n%d went to %s, bound to %s", stage, id, i+1, got, want)
				}
			}
		}
	}
	check("all up", 0, 1, 2)
	c.checkSessionReads(t, sessions)

	l := c.leader()
	if l < 0 {
		t.Fatal("no leader")
	}
	c.stop(l)
	others := []int{(l + 1) % 3, (l + 2) % 3}
	check("leader stopped", others...)

	c.start(l)
	c.waitReady(l)
	check("old leader restarted", 0, 1, 2)
}

// testLogger discards logs unless KVRTEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("KVRTEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// TestClusterOverMutualTLS runs the cluster with raft's transport and the
// cluster API over mutual TLS, and checks that a client without a
// certificate is refused by the cluster API.
func TestClusterOverMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("three raft nodes and engines; run without -short")
	}
	ca := mtlstest.NewCA(t, t.TempDir())
	c := startDCCluster(t, 2, func(cfg *node.Config) {
		f := ca.Issue(t, mtls.Identity{DC: cfg.DC, Role: mtls.RoleMember, Name: cfg.NodeID})
		cfg.Cluster.TLSCert, cfg.Cluster.TLSKey, cfg.Cluster.TLSCA = f.Cert, f.Key, f.CA
	})
	id := "tls-session"
	want := c.complete(0, id, tokens(5, 64))
	for i := range 3 {
		if got := c.complete(i, id, tokens(6, 64)); got != want {
			t.Fatalf("session through n%d went to %s, bound to %s", i+1, got, want)
		}
	}
	conn, err := grpc.NewClient(c.cfgs[0].Cluster.APIAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := kvrpb.NewClusterAdminClient(conn).Status(ctx, &kvrpb.AdminStatusRequest{}); err == nil {
		t.Fatal("a plaintext client was served by a TLS cluster API")
	}
}

// TestClusterJoinAndLeave adds a fourth member with --join through a
// follower, checks it serves the DC's bindings, then removes it through
// the cluster API.
func TestClusterJoinAndLeave(t *testing.T) {
	if testing.Short() {
		t.Skip("four raft nodes and engines; run without -short")
	}
	c := startDCCluster(t, 2)
	id := "before-join"
	want := c.complete(0, id, tokens(8, 64))

	l := c.leader()
	via := c.cfgs[(l+1)%3].Cluster.APIAddr // a follower relays the join
	cfg := c.cfgs[0]
	cfg.NodeID, cfg.HTTPAddr = "n4", freeAddr(t)
	cfg.Cluster = node.ClusterConfig{RaftAddr: freeAddr(t), APIAddr: freeAddr(t), DataDir: t.TempDir(), Join: via}
	c.cfgs = append(c.cfgs, cfg)
	c.nodes, c.stops, c.dones = append(c.nodes, nil), append(c.stops, nil), append(c.dones, nil)
	c.start(3)
	c.waitReady(3)
	if got := c.complete(3, id, tokens(9, 64)); got != want {
		t.Fatalf("session through the joined member went to %s, bound to %s", got, want)
	}
	st, err := c.nodes[l].Cluster().Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.GetMembers()) != 4 {
		t.Fatalf("leader sees %d members, want 4", len(st.GetMembers()))
	}

	conn, err := grpc.NewClient(via, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kvrpb.NewClusterAdminClient(conn).Leave(ctx, &kvrpb.AdminLeaveRequest{Id: "n4"}); err != nil {
		t.Fatal(err)
	}
	st, err = c.nodes[l].Cluster().Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.GetMembers()) != 3 {
		t.Fatalf("leader sees %d members after leave, want 3", len(st.GetMembers()))
	}
}

// TestClusterFullRestartReconcilesOwnership stops every node, stops one
// engine while the cluster is down, and restarts the nodes from their data
// directories: the ownership is back from disk before the nodes serve, and
// the gone engine's is removed by the leader's reconciliation.
func TestClusterFullRestartReconcilesOwnership(t *testing.T) {
	if testing.Short() {
		t.Skip("three raft nodes and engines; run without -short")
	}
	c := startDCCluster(t, 3)
	for s := range 6 {
		c.complete(s%3, "", tokens(300+s, 128))
	}
	waittest.Until(t, 10*time.Second, "the nodes' indexes hold blocks and agree", c.indexesAgree)
	victim := c.nodes[0].Cluster().FSM().Index().Workers()[0].ID
	for i := range c.nodes {
		c.stop(i)
	}
	c.engStp[uint64(victim)]()
	for i := range c.nodes {
		c.start(i)
	}
	for i := range c.nodes {
		if pairs := c.nodes[i].Cluster().FSM().Index().Stats().Pairs; pairs == 0 {
			t.Fatalf("n%d restarted with an empty index", i+1)
		}
	}
	for i := range c.nodes {
		c.waitReady(i)
	}
	waittest.UntilNil(t, 30*time.Second, fmt.Sprintf("engine %d's ownership reconciled away on every node, with one state", victim), func() error {
		var states []string
		gone := true
		for i, n := range c.nodes {
			for _, w := range n.Cluster().FSM().Index().Workers() {
				gone = gone && w.ID != victim
			}
			idx, h := n.Cluster().FSM().StateHash()
			states = append(states, fmt.Sprintf("n%d: applied %d hash %x workers %v pairs %d", i+1, idx, h,
				n.Cluster().FSM().Index().Workers(), n.Cluster().FSM().Index().Stats().Pairs))
		}
		if gone && c.statesEqual() {
			return nil
		}
		return fmt.Errorf("gone everywhere %v; %s", gone, strings.Join(states, "; "))
	})
}

// checkSessionReads checks GET /v1/sessions/{id} on every node: each bound
// session is reported on the engine that served it, with one version
// across the nodes, and an unknown session is a 404 session_not_found.
func (c *dcCluster) checkSessionReads(t *testing.T, sessions map[string]string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for id, want := range sessions {
		var version uint64
		for i, n := range c.nodes {
			var v struct {
				Engine  string `json:"engine"`
				Version uint64 `json:"version"`
				DC      string `json:"dc"`
			}
			for {
				resp, err := http.Get("http://" + n.Addr().String() + "/v1/sessions/" + id)
				if err != nil {
					t.Fatal(err)
				}
				err = json.NewDecoder(resp.Body).Decode(&v)
				resp.Body.Close()
				if err == nil && resp.StatusCode == 200 {
					break
				}
				if time.Now().After(deadline) { // a follower may not have applied the bind yet
					t.Fatalf("n%d: GET session %s: status %d, %v", i+1, id, resp.StatusCode, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if v.Engine != want || v.DC != "dc1" || (version != 0 && v.Version != version) {
				t.Fatalf("n%d: session %s reported %+v, want engine %s version %d", i+1, id, v, want, version)
			}
			version = v.Version
		}
	}
	resp, err := http.Get("http://" + c.nodes[0].Addr().String() + "/v1/sessions/never-bound")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !bytes.Contains(body, []byte(`"session_not_found"`)) {
		t.Fatalf("unknown session: %d %s", resp.StatusCode, body)
	}
}
