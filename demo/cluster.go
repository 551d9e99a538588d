package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/fleet/natsbus"
	"github.com/kvrouter/kvrouter/internal/freeport"
	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/mocker/server"
	"github.com/kvrouter/kvrouter/node"
)

// ClusterSize is the number of router nodes of the demo's DC.
const ClusterSize = 3

// crashDrain is how long a killed node lets its in-flight requests run:
// almost nothing, so that a kill looks like a crash to the clients.
const crashDrain = time.Millisecond

// engineLiveness is how long the demo's router nodes and relays let an
// engine's heartbeats stop before they drop it and cut its requests: 60
// of the engines' heartbeat periods (500 ms, unscaled by Compress), not
// the routers' default of six. The whole demo (NATS servers, nodes,
// relays, engines and the client) is one process, and when other work
// takes the machine's cores its goroutines wait seconds to run.
// A heartbeat passes through several of them (the engine's ticker, its
// NATS client, the embedded server, the node's subscription), so it
// arrived up to 8 s late beside a parallel build on two cores, while the
// node's pause detection, which times only its own sweeper, saw no pause:
// at 3 s every node dropped engines that had never stopped, and the
// replay lost requests waiting on them or streaming from them. The
// demo's engines run as long as the demo, so a long timeout hides no
// failure; what the replays measure is placement, not failure detection.
const engineLiveness = 30 * time.Second

// Cluster is the demo's DC: one NATS server, a 3-node router cluster in
// raft with Pebble on disk (in a temporary directory), and the engines,
// all in this process on loopback. Node 0 listens on Config.HTTPAddr.
type Cluster struct {
	log   *slog.Logger
	bus   *natsbus.Bus
	dir   string
	cfgs  []node.Config
	nodes []*node.Node
	stops []context.CancelFunc
	dones []chan struct{}
	// serving marks the nodes clients may use: started and caught up, as a
	// load balancer's health check would tell (GET /ready).
	serving []bool
	engines *group

	mu sync.Mutex
}

// StartCluster starts the DC with the given policy and waits until every
// node serves.
func StartCluster(ctx context.Context, cfg Config, policy string, log *slog.Logger) (*Cluster, error) {
	return startDC(ctx, cfg, "dc1", cfg.HTTPAddr, policy, log)
}

// startDC starts DC dc with node n1 on httpAddr.
func startDC(ctx context.Context, cfg Config, dc, httpAddr, policy string, log *slog.Logger) (_ *Cluster, err error) {
	bus, err := natsbus.Open(natsbus.Config{URL: natsbus.Embedded, EmbeddedAddr: "127.0.0.1:0", Name: "demo-nats"}, log)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kvrouter-demo-")
	if err != nil {
		bus.Close()
		return nil, err
	}
	c := &Cluster{log: log.With("dc", dc), bus: bus, dir: dir}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	addrs := make([][3]string, ClusterSize)
	var peers []string
	for i := range addrs {
		for j := range addrs[i] {
			if addrs[i][j], err = freeport.Loopback(); err != nil {
				return nil, err
			}
		}
		peers = append(peers, fmt.Sprintf("n%d=%s/%s", i+1, addrs[i][1], addrs[i][2]))
	}
	for i := range ClusterSize {
		ncfg := node.DefaultConfig()
		ncfg.DC, ncfg.NodeID, ncfg.NATS = dc, fmt.Sprintf("n%d", i+1), bus.URL()
		ncfg.HTTPAddr = addrs[i][0]
		if i == 0 && httpAddr != "" {
			ncfg.HTTPAddr = httpAddr
		}
		ncfg.Dispatch.Policy = policy
		ncfg.Dispatch.AffinityTTL = time.Hour
		ncfg.Events.LivenessTimeout = engineLiveness
		ncfg.Frontend.ShutdownTimeout = crashDrain
		ncfg.Drain.NoTransfer = true // Kill simulates a crash
		ncfg.Cluster = node.ClusterConfig{RaftAddr: addrs[i][1], APIAddr: addrs[i][2], Peers: peers,
			Bootstrap: true, DataDir: filepath.Join(dir, ncfg.NodeID)}
		c.cfgs = append(c.cfgs, ncfg)
	}
	c.nodes, c.stops, c.dones = make([]*node.Node, ClusterSize), make([]context.CancelFunc, ClusterSize), make([]chan struct{}, ClusterSize)
	c.serving = make([]bool, ClusterSize)
	for i := range ClusterSize {
		if err := c.start(ctx, i); err != nil {
			return nil, err
		}
	}
	c.engines = &group{errs: make(chan error, cfg.Engines+1)}
	ectx, cancel := context.WithCancel(ctx)
	c.engines.cancel = cancel
	for id := range cfg.Engines {
		if err := c.startEngine(ectx, cfg, uint64(id+1)); err != nil {
			return nil, err
		}
	}
	for i := range ClusterSize {
		if err := c.WaitServing(ctx, i, 30*time.Second); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, i int) error {
	n, err := node.New(c.cfgs[i], c.log)
	if err != nil {
		return err
	}
	nctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := n.Run(nctx); err != nil && !errors.Is(err, context.Canceled) {
			c.log.Error("router node stopped", "node", c.cfgs[i].NodeID, "err", err)
		}
	}()
	c.mu.Lock()
	c.nodes[i], c.stops[i], c.dones[i] = n, cancel, done
	c.mu.Unlock()
	return n.WaitReady(nctx)
}

func (c *Cluster) startEngine(ctx context.Context, cfg Config, id uint64) error {
	bus, err := natsbus.Open(natsbus.Config{URL: c.bus.URL(), Name: fmt.Sprintf("demo-engine-%d", id)}, c.log)
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{DC: c.cfgs[0].DC, EngineID: id, Engine: mocker.Config{SpeedUp: cfg.Compress, NumBlocks: cfg.NumBlocks}}, bus.Conn, c.log.With("engine", id))
	if err != nil {
		bus.Close()
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		bus.Close()
		return err
	}
	c.engines.goRun(func() error {
		defer bus.Close()
		return srv.Serve(ctx, ln)
	})
	return nil
}

// WaitServing waits until node i reports ready: caught up with the
// cluster and knowing the engines.
func (c *Cluster) WaitServing(ctx context.Context, i int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c.mu.Lock()
		n := c.nodes[i]
		c.mu.Unlock()
		if n.Ready() {
			c.mu.Lock()
			c.serving[i] = true
			c.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: router node n%d not serving within %v", i+1, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Leader returns the index of the node that leads, or -1.
func (c *Cluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range c.nodes {
		if c.stops[i] != nil && n.Cluster() != nil && n.Cluster().IsLeader() {
			return i
		}
	}
	return -1
}

// Kill stops node i abruptly: in-flight requests through it are cut.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	stop, done := c.stops[i], c.dones[i]
	c.stops[i], c.serving[i] = nil, false
	c.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// Restart starts a killed node again on its data directory.
func (c *Cluster) Restart(ctx context.Context, i int) error { return c.start(ctx, i) }

// URLs returns the client URLs of the serving nodes.
func (c *Cluster) URLs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for i, n := range c.nodes {
		if c.serving[i] && n.Addr() != nil {
			out = append(out, "http://"+n.Addr().String())
		}
	}
	return out
}

// Stop stops the nodes, then the engines and NATS, and removes the data.
func (c *Cluster) Stop() {
	for i := range c.stops {
		if c.stops[i] != nil {
			c.Kill(i)
		}
	}
	if c.engines != nil {
		c.engines.cancel()
		c.engines.wg.Wait()
	}
	c.bus.Close()
	_ = os.RemoveAll(c.dir)
}

// Serve starts the demo's DC for interactive use (kvrouter demo --serve):
// the kv policy, the configured engines, node n1 on Config.HTTPAddr.
func Serve(ctx context.Context, cfg Config, log *slog.Logger) (*Cluster, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return StartCluster(ctx, cfg, "kv", log)
}

// Nodes lists each node's id, client URL and cluster API address.
func (c *Cluster) Nodes() [][3]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([][3]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = [3]string{c.cfgs[i].NodeID, "http://" + n.Addr().String(), c.cfgs[i].Cluster.APIAddr}
	}
	return out
}
