package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kvrouter/kvrouter/routing/policy"
	"github.com/kvrouter/kvrouter/sim"
	"github.com/kvrouter/kvrouter/traces"
)

// simFlags are the options of `kvrouter sim` and `kvrouter demo`.
type simFlags struct {
	trace     string
	policies  string
	engines   int
	blockSize int
	rateScale float64
	seed      uint64
	limit     int
	noEvents  bool
	json      bool
}

func (f *simFlags) register(cmd *cobra.Command, defaultPolicies string) {
	fs := cmd.Flags()
	fs.StringVar(&f.trace, "trace", "", "Mooncake JSONL trace to replay (default: the bundled Mooncake synthetic trace)")
	fs.StringVar(&f.policies, "policies", defaultPolicies, "comma-separated routing policies to compare; one of "+strings.Join(policy.Names(), ", "))
	fs.IntVar(&f.engines, "engines", sim.DefaultEngines, "number of simulated engines")
	fs.IntVar(&f.blockSize, "block-size", sim.DefaultBlockSize, "engine KV block size in tokens (must divide 512)")
	fs.Float64Var(&f.rateScale, "rate-scale", 1, "multiply the trace's arrival rate by this factor")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the selectors' random tie-breaks")
	fs.IntVar(&f.limit, "limit", 0, "replay only the first N requests (0: all)")
	fs.BoolVar(&f.noEvents, "no-kv-events", false, "approximate mode: ignore engine KV events, index the router's own decisions")
	fs.BoolVar(&f.json, "json", false, "print a JSON array instead of a table")
}

func (f *simFlags) config() sim.Config {
	return sim.Config{Engines: f.engines, BlockSize: f.blockSize, RateScale: f.rateScale,
		Seed: f.seed, NoKVEvents: f.noEvents}
}

func (f *simFlags) load() ([]traces.Request, string, error) {
	name, data := "bundled Mooncake synthetic trace", traces.MooncakeSynthetic
	if f.trace != "" {
		b, err := os.ReadFile(f.trace)
		if err != nil {
			return nil, "", fmt.Errorf("--trace: %w", err)
		}
		name, data = f.trace, b
	}
	reqs, err := traces.ReadBytes(data)
	if err != nil {
		return nil, "", fmt.Errorf("--trace %s: %w", name, err)
	}
	if f.limit < 0 {
		return nil, "", fmt.Errorf("--limit must be >= 0, got %d", f.limit)
	}
	if f.limit > 0 && f.limit < len(reqs) {
		reqs = reqs[:f.limit]
	}
	if len(reqs) == 0 {
		return nil, "", fmt.Errorf("--trace %s: no requests", name)
	}
	return reqs, name, nil
}

func (f *simFlags) policyList() ([]string, error) {
	var out []string
	for p := range strings.SplitSeq(f.policies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--policies: at least one policy is required")
	}
	return out, nil
}

func newSimCmd() *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Replay a request trace through the routing core and simulated engines",
		Long: `sim replays a Mooncake JSONL trace on a virtual clock through kvrouter's real
routing code and simulated engines, once per policy, and prints one row per policy:
block hit ratio (and its share of the trace's infinite-cache bound), TTFT mean/p50/p99,
ITL p50, load max/mean across engines, throughput and routing decision time.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSim(cmd, &f, false) },
	}
	f.register(cmd, "kv,round-robin,least-loaded,two-tier")
	return cmd
}

func runSim(cmd *cobra.Command, f *simFlags, banner bool) error {
	reqs, name, err := f.load()
	if err != nil {
		return err
	}
	pols, err := f.policyList()
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if banner && !f.json {
		fmt.Fprintf(out, "Replaying %d requests of the %s through %d simulated engines (virtual clock)...\n\n", len(reqs), name, f.engines)
	}
	rs, err := sim.Compare(cmd.Context(), reqs, pols, f.config())
	if err != nil {
		return err
	}
	if f.json {
		return sim.WriteJSON(out, rs)
	}
	if err := sim.WriteTable(out, rs); err != nil {
		return err
	}
	if len(rs) > 0 {
		fmt.Fprintf(out, "\ninfinite-cache bound: %.3f of prompt blocks; %d requests over %.0f simulated seconds\n",
			rs[0].BoundHitRatio, rs[0].Requests, rs[0].SimulatedSeconds)
	}
	return nil
}
