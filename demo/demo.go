package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/mocker/server"
	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/node/natsbus"
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
	// Trace is the workload; nil means the bundled Mooncake trace.
	Trace []traces.Request
}

// Defaults: 600 requests are the trace's first 2.5 minutes, which the
// default compression of 10 replays in about 15 s per policy.
const (
	DefaultEngines  = 4
	DefaultRequests = 600
	DefaultCompress = 10
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

// Fleet is one running node with its engines.
type Fleet struct {
	Node   *node.Node
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan error
}

// StartFleet starts a node with the given policy and engines, and waits
// until every engine has registered.
func StartFleet(ctx context.Context, cfg Config, policy string, log *slog.Logger) (*Fleet, error) {
	ncfg := node.DefaultConfig()
	ncfg.HTTPAddr = cfg.HTTPAddr
	ncfg.NATSListen = "127.0.0.1:0"
	ncfg.Dispatch.Policy = policy
	n, err := node.New(ncfg, log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &Fleet{Node: n, cancel: cancel, errs: make(chan error, cfg.Engines+1)}
	f.goRun(func() error { return n.Run(ctx) })
	if err := n.WaitReady(ctx); err != nil {
		f.Stop()
		return nil, errors.Join(err, f.firstErr())
	}
	for i := range cfg.Engines {
		if err := f.startEngine(ctx, cfg, uint64(i+1), log); err != nil {
			f.Stop()
			return nil, err
		}
	}
	if err := f.waitEngines(ctx, cfg.Engines); err != nil {
		f.Stop()
		return nil, err
	}
	return f, nil
}

func (f *Fleet) goRun(fn func() error) {
	f.wg.Go(func() {
		if err := fn(); err != nil && !errors.Is(err, context.Canceled) {
			f.errs <- err
		}
	})
}

func (f *Fleet) startEngine(ctx context.Context, cfg Config, id uint64, log *slog.Logger) error {
	bus, err := natsbus.Open(natsbus.Config{URL: f.Node.NATSURL(), Name: fmt.Sprintf("demo-engine-%d", id)}, log)
	if err != nil {
		return err
	}
	scfg := server.Config{EngineID: id, Engine: mocker.Config{SpeedUp: cfg.Compress}}
	srv, err := server.New(scfg, bus.Conn, log.With("engine", id))
	if err != nil {
		bus.Close()
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		bus.Close()
		return err
	}
	f.goRun(func() error {
		defer bus.Close()
		return srv.Serve(ctx, ln)
	})
	return nil
}

func (f *Fleet) waitEngines(ctx context.Context, want int) error {
	deadline := time.After(15 * time.Second)
	for f.Node.Engines() < want {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-f.errs:
			return err
		case <-deadline:
			return fmt.Errorf("demo: %d of %d engines registered within 15s", f.Node.Engines(), want)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

func (f *Fleet) firstErr() error {
	select {
	case err := <-f.errs:
		return err
	default:
		return nil
	}
}

// Stop shuts the engines and the node down and waits for them.
func (f *Fleet) Stop() {
	f.cancel()
	f.wg.Wait()
}

// BaseURL is the node's client URL.
func (f *Fleet) BaseURL() string { return "http://" + f.Node.Addr().String() }

// Run replays the trace once per policy, each on a fresh fleet, and prints
// the report to out.
func Run(ctx context.Context, cfg Config, out io.Writer, log *slog.Logger) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Live demo: embedded NATS, 1 router node on %s, %d simulated engines (Llama-3.1-8B/H100 timing model, %gx speed).\n",
		cfg.HTTPAddr, cfg.Engines, cfg.Compress)
	fmt.Fprintf(out, "Replaying the first %d requests of the bundled Mooncake trace over HTTP, %gx compressed, per policy.\n\n", len(cfg.Trace), cfg.Compress)
	var sums []Summary
	for _, p := range cfg.Policies {
		s, err := replayPolicy(ctx, cfg, p, log)
		if err != nil {
			return fmt.Errorf("policy %s: %w", p, err)
		}
		sums = append(sums, s)
	}
	return WriteSummaries(out, sums)
}

func replayPolicy(ctx context.Context, cfg Config, policy string, log *slog.Logger) (Summary, error) {
	f, err := StartFleet(ctx, cfg, policy, log)
	if err != nil {
		return Summary{}, err
	}
	defer f.Stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}
	defer client.CloseIdleConnections()
	r := &Replayer{BaseURL: f.BaseURL(), Model: mocker.DefaultModel, Compress: cfg.Compress, Client: client}
	start := time.Now()
	outs := r.Run(ctx, cfg.Trace)
	if err := ctx.Err(); err != nil {
		return Summary{}, err
	}
	return Summarize(policy, outs, time.Since(start)), nil
}
