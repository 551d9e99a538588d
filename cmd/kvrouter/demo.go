package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/kvrouter/kvrouter/demo"
	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/node"
)

type demoFlags struct {
	sim      simFlags
	live     demo.Config
	serve    bool
	noSim    bool
	noFed    bool
	logLevel string
}

func newDemoCmd() *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Compare routing policies on the bundled trace: simulated, then live over HTTP",
		Long: `demo needs nothing but this binary. It first replays the bundled Mooncake trace on a
virtual clock through the routing core and simulated engines, once per policy, and prints
the comparison. Then it starts a live DC on loopback (embedded NATS, simulated engines
serving HTTP, a 3-node router cluster in raft) and replays a generated multi-turn chat
workload through the nodes' OpenAI-compatible API with a real client, once per policy
(kv, round-robin, kv-ttft) on a fresh DC, without session ids; it prints hit ratio, prefill
tokens saved and TTFT side by side, simulates the same requests on the same fleet shape,
states whether both order kv and round-robin alike, and writes the simulation's HTML
report (--report, or a temporary directory). --kill-leader also kills the raft leader
halfway through each live replay and restarts it. Last, two such DCs with a relay each and a 20 ms WAN round trip between them replay it
through their gateways, some conversations continuing in the other DC, and the report gives
local and cross-DC hit ratios, forwards, TTFT and affinity violations.

With --serve it only starts the live fleet and leaves it running for curl or any OpenAI
client until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return explainListenError(cmd.Flags(), runDemo(cmd, &f)) },
	}
	f.sim.register(cmd, "kv,round-robin,least-loaded,two-tier,power-of-two,random")
	fs := cmd.Flags()
	fs.BoolVar(&f.serve, "serve", false, "start the live fleet and leave it running")
	fs.BoolVar(&f.noSim, "no-sim", false, "skip the simulated comparison")
	fs.BoolVar(&f.noFed, "no-federation", false, "skip the two-DC federation replay")
	fs.StringVar(&f.live.HTTPAddr, "http-addr", node.DefaultHTTPAddr, "the router node's client-facing address")
	fs.IntVar(&f.live.Requests, "live-requests", demo.DefaultRequests, "trace requests replayed live per policy")
	fs.Float64Var(&f.live.Compress, "compress", 0, fmt.Sprintf("live replays: arrivals and engine clocks this many times faster than the trace (0: %gx for the comparison, %gx for the federation)",
		float64(demo.DefaultCompareCompress), float64(demo.DefaultCompress)))
	fs.StringSliceVar(&f.live.Policies, "live-policies", []string{"kv", "round-robin", "kv-ttft"}, "policies replayed live")
	fs.IntVar(&f.live.NumBlocks, "num-blocks", demo.DefaultNumBlocks, "live comparison: each engine's KV capacity in blocks")
	fs.BoolVar(&f.live.KillLeader, "kill-leader", false, "live comparison: kill the raft leader halfway through each replay and restart it")
	fs.StringVar(&f.logLevel, "log-level", "error", "log level of the live fleet")
	return cmd
}

func runDemo(cmd *cobra.Command, f *demoFlags) error {
	log, err := (&logFlags{level: f.logLevel, format: "text"}).logger(os.Stderr)
	if err != nil {
		return err
	}
	f.live.Engines = f.sim.engines
	if f.serve {
		return serveDemo(cmd, f, log)
	}
	out := cmd.OutOrStdout()
	// --report receives the live comparison's simulation, not the first
	// part's.
	f.live.ReportDir, f.sim.report = f.sim.report, ""
	if !f.noSim {
		if err := runSim(cmd, &f.sim, true); err != nil {
			return err
		}
		fmt.Fprintln(out)
	}
	if err := demo.Run(cmd.Context(), f.live, out, log); err != nil {
		return err
	}
	if f.noFed {
		return nil
	}
	fmt.Fprintln(out)
	fed := f.live
	fed.HTTPAddr, fed.NumBlocks = "", 0
	return demo.RunFederation(cmd.Context(), fed, out, log)
}

func serveDemo(cmd *cobra.Command, f *demoFlags, log *slog.Logger) error {
	c, err := demo.Serve(cmd.Context(), f.live, log)
	if err != nil {
		return err
	}
	defer c.Stop()
	nodes := c.Nodes()
	base := nodes[0][1]
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "kvrouter demo DC is up: a %d-node router cluster and %d simulated engines serving %q.\n",
		len(nodes), f.live.Engines, mocker.DefaultModel)
	for _, n := range nodes {
		fmt.Fprintf(out, "  %s  %s/v1  (cluster API %s)\n", n[0], n[1], n[2])
	}
	fmt.Fprintf(out, `Try:
  curl -s %s/v1/models
  curl -s %s/v1/chat/completions -H 'Content-Type: application/json' -H 'X-Session-ID: demo-1' \
    -d '{"model":"%s","messages":[{"role":"user","content":"Hello"}],"stream":true}'
  kvrouter cluster status --addr %s
Metrics: %s/metrics. Press Ctrl-C to stop.
`, base, base, mocker.DefaultModel, nodes[0][2], base)
	<-cmd.Context().Done()
	return nil
}
