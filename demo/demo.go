package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/traces"
)

// Config is the demo's setup; zero fields take the defaults below.
type Config struct {
	// HTTPAddr is the node's client-facing address.
	HTTPAddr string
	// Engines is the number of simulated engines.
	Engines int
	// Requests replays the first Requests records of the trace.
	Requests int
	// Compress speeds up arrivals and the engines' clocks alike.
	Compress float64
	// Policies are replayed in order, each on a fresh fleet.
	Policies []string
	// Trace is the workload; nil means the bundled Mooncake trace for the
	// federation replay and ChatWorkload for the policy comparison.
	Trace []traces.Request
	// NumBlocks is each engine's KV capacity in blocks; zero means the
	// mocker's default (Run: DefaultNumBlocks).
	NumBlocks int
	// KillLeader kills the raft leader halfway through each replay of the
	// comparison and restarts it.
	KillLeader bool
	// ReportDir receives the HTML report of the comparison's simulation;
	// empty means a new temporary directory.
	ReportDir string
}

// Defaults: the federation replays the bundled trace's first 600
// requests, its first 2.5 minutes, at 10x in about 15 s. The comparison's
// 259 requests span 135 trace seconds, which 5x replays in about 27 s per
// policy: above that, the router's own work (wall time) weighs in TTFT
// against engine timings that shrink with the compression.
const (
	DefaultEngines         = 4
	DefaultRequests        = 600
	DefaultCompress        = 10
	DefaultCompareCompress = 5
)

func (c Config) withDefaults() (Config, error) {
	if c.HTTPAddr == "" {
		c.HTTPAddr = node.DefaultHTTPAddr
	}
	if c.Engines == 0 {
		c.Engines = DefaultEngines
	}
	if c.Requests == 0 {
		c.Requests = DefaultRequests
	}
	if c.Compress == 0 {
		c.Compress = DefaultCompress
	}
	if len(c.Policies) == 0 {
		c.Policies = []string{"kv", "round-robin"}
	}
	switch {
	case c.Engines < 1 || c.Engines > 64:
		return c, fmt.Errorf("demo: engines must be in 1..64, got %d", c.Engines)
	case c.Requests < 1:
		return c, fmt.Errorf("demo: requests must be positive, got %d", c.Requests)
	case !(c.Compress > 0 && c.Compress <= 1000):
		return c, fmt.Errorf("demo: compress must be in (0, 1000], got %v", c.Compress)
	case c.NumBlocks < 0:
		return c, fmt.Errorf("demo: num-blocks must be >= 0, got %d", c.NumBlocks)
	}
	if c.Trace == nil {
		reqs, err := traces.ReadBytes(traces.MooncakeSynthetic)
		if err != nil {
			return c, err
		}
		c.Trace = reqs
	}
	c.Trace = c.Trace[:min(len(c.Trace), c.Requests)]
	return c, nil
}

// group runs goroutines whose errors the demo reports.
type group struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan error
}

func (g *group) goRun(fn func() error) {
	g.wg.Go(func() {
		if err := fn(); err != nil && !errors.Is(err, context.Canceled) {
			select {
			case g.errs <- err:
			default:
			}
		}
	})
}

// Run replays the workload once per policy, each on a fresh 3-node
// cluster, without session ids so that only the policy places each turn;
// then simulates the same requests on the same fleet shape and prints both
// comparisons and whether they order kv and round-robin alike.
func Run(ctx context.Context, cfg Config, out io.Writer, log *slog.Logger) error {
	if cfg.Trace == nil {
		reqs, err := ChatWorkload()
		if err != nil {
			return err
		}
		cfg.Trace = reqs
	}
	if cfg.NumBlocks == 0 {
		cfg.NumBlocks = DefaultNumBlocks
	}
	if cfg.Compress == 0 {
		cfg.Compress = DefaultCompareCompress
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	var span time.Duration
	if n := len(cfg.Trace); n > 0 {
		span = cfg.Trace[n-1].Arrival
	}
	fmt.Fprintf(out, "Live comparison: embedded NATS, a %d-node router cluster (raft, Pebble on disk) with n1 on %s, %d simulated\n",
		ClusterSize, cfg.HTTPAddr, cfg.Engines)
	fmt.Fprintf(out, "engines of %d KV blocks each (Llama-3.1-8B/H100 timing model, %gx speed). Replaying %d requests of multi-turn\n",
		cfg.NumBlocks, cfg.Compress, len(cfg.Trace))
	fmt.Fprintf(out, "chat (a shared system prompt, every turn resending its conversation; %.0f trace seconds, seed %d) over HTTP,\n",
		span.Seconds(), WorkloadSeed)
	fmt.Fprintf(out, "%gx compressed, once per policy on a fresh DC, without session ids: only the policy decides where a turn goes.\n", cfg.Compress)
	fmt.Fprintf(out, "Requests enter at n1 (n2, n3 take over if it is down), as the simulator's one router.\n")
	if cfg.KillLeader {
		fmt.Fprintf(out, "The raft leader is killed halfway through each replay and restarted.\n")
	}
	fmt.Fprintln(out)
	var sums []Summary
	for _, p := range cfg.Policies {
		s, err := replayPolicy(ctx, cfg, p, log)
		if err != nil {
			return fmt.Errorf("policy %s: %w", p, err)
		}
		sums = append(sums, s)
	}
	if err := WriteComparison(out, sums); err != nil {
		return err
	}
	return compareWithSim(ctx, cfg, sums, out)
}

// restartAfter is how long a killed leader stays down.
const restartAfter = 2 * time.Second

func replayPolicy(ctx context.Context, cfg Config, policy string, log *slog.Logger) (Summary, error) {
	c, err := StartCluster(ctx, cfg, policy, log)
	if err != nil {
		return Summary{}, err
	}
	defer c.Stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}
	defer client.CloseIdleConnections()
	r := &Replayer{URLs: c.URLs, Failover: true, Model: mocker.DefaultModel, Compress: cfg.Compress, Client: client}

	var span time.Duration
	if n := len(cfg.Trace); n > 0 {
		span = time.Duration(float64(cfg.Trace[n-1].Arrival) / cfg.Compress)
	}
	fault := make(chan string, 1)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.KillLeader {
		go func() { fault <- c.killLeader(fctx, span/2) }()
	} else {
		fault <- ""
	}

	start := time.Now()
	outs := r.Run(ctx, cfg.Trace)
	if err := ctx.Err(); err != nil {
		return Summary{}, err
	}
	s := Summarize(policy, outs, time.Since(start))
	cancel()
	s.Event = <-fault
	return s, nil
}

// killLeader kills the leader after wait, restarts it restartAfter later
// and describes what happened.
func (c *Cluster) killLeader(ctx context.Context, wait time.Duration) string {
	select {
	case <-ctx.Done():
		return "replay ended before the leader kill"
	case <-time.After(wait):
	}
	l := c.Leader()
	if l < 0 {
		return "no leader to kill"
	}
	t0 := time.Now()
	c.Kill(l)
	msg := fmt.Sprintf("leader n%d killed at %.1fs into the replay", l+1, wait.Seconds())
	select {
	case <-ctx.Done():
	case <-time.After(restartAfter):
	}
	if err := c.Restart(context.WithoutCancel(ctx), l); err != nil {
		return msg + fmt.Sprintf("; restart failed: %v", err)
	}
	if err := c.WaitServing(context.WithoutCancel(ctx), l, 30*time.Second); err != nil {
		return msg + fmt.Sprintf("; %v", err)
	}
	return msg + fmt.Sprintf(", restarted, caught up and serving again %.1fs after the kill; new leader n%d",
		time.Since(t0).Seconds(), c.Leader()+1)
}
