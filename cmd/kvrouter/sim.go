package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/load"
	"github.com/kvrouter/kvrouter/sim"
	"github.com/kvrouter/kvrouter/sim/gen"
	"github.com/kvrouter/kvrouter/sim/report"
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
	approx    string
	output    bool
	oslHints  bool
	decay     float64
	json      bool
	report    string
	// prefillEngines makes the replay disaggregated.
	prefillEngines int
}

func (f *simFlags) register(cmd *cobra.Command, defaultPolicies string) {
	fs := cmd.Flags()
	fs.StringVar(&f.trace, "trace", "", "Mooncake JSONL trace to replay (default: the bundled Mooncake synthetic trace)")
	fs.StringVar(&f.policies, "policies", defaultPolicies, "comma-separated routing policies to compare, or all; one of "+strings.Join(sim.Policies(), ", "))
	fs.IntVar(&f.engines, "engines", sim.DefaultEngines, "number of simulated engines")
	fs.IntVar(&f.blockSize, "block-size", sim.DefaultBlockSize, "engine KV block size in tokens (must divide 512)")
	fs.Float64Var(&f.rateScale, "rate-scale", 1, "multiply the trace's arrival rate by this factor")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the selectors' random tie-breaks")
	fs.IntVar(&f.limit, "limit", 0, "replay only the first N requests (0: all)")
	fs.BoolVar(&f.noEvents, "no-kv-events", false, "approximate mode: ignore engine KV events, index the router's own decisions")
	fs.StringVar(&f.approx, "router-approximate-cache-policy", "ttl", "approximate mode's index: ttl, or lru at each engine's capacity")
	fs.BoolVar(&f.output, "router-track-output-blocks", false, "report generated tokens to the router's load tracker as they come")
	fs.BoolVar(&f.oslHints, "osl-hints", false, "with output tracking, give each request its trace output length as its osl hint")
	fs.Float64Var(&f.decay, "output-block-decay", load.DefaultOutputDecay, "output blocks' weight: 1 - this × output/osl (with --osl-hints)")
	fs.BoolVar(&f.json, "json", false, "print a JSON array instead of a table")
	fs.StringVar(&f.report, "report", "", "also write an HTML report with SVG charts to this directory")
	fs.IntVar(&f.prefillEngines, "prefill-engines", 0, "replay disaggregated: this many of --engines are prefill engines, the others decode (0: aggregated)")
}

func (f *simFlags) config() (sim.Config, error) {
	approx, err := index.ParsePolicy(f.approx)
	if err != nil {
		return sim.Config{}, fmt.Errorf("--router-approximate-cache-policy: %w", err)
	}
	return sim.Config{Engines: f.engines, BlockSize: f.blockSize, RateScale: f.rateScale,
		Seed: f.seed, NoKVEvents: f.noEvents, ApproxPolicy: approx, PrefillEngines: f.prefillEngines,
		TrackOutputBlocks: f.output, OutputHints: f.oslHints, OutputDecay: &f.decay}, nil
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
		switch p = strings.TrimSpace(p); p {
		case "":
		case "all":
			out = append(out, sim.Policies()...)
		default:
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
block hit ratio and its share of three references (the infinite-cache bound, one pooled
LRU cache of the fleet's capacity, and a clairvoyant placement on the fleet's caches),
TTFT mean/p50/p99, ITL p50, load max/mean across engines, throughput and routing decision
time. The policy the README recommends is marked with * (and "recommended": true in
--json). "sim gen" writes the generated workloads.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSim(cmd, &f, false) },
	}
	f.register(cmd, "kv,round-robin,least-loaded,two-tier,"+sim.Recommended)
	cmd.AddCommand(newSimGenCmd(), newSimOverloadCmd())
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
	cfg, err := f.config()
	if err != nil {
		return err
	}
	rs, err := sim.Compare(cmd.Context(), reqs, pols, cfg)
	if err != nil {
		return err
	}
	if f.report != "" {
		in := report.Inputs{Title: fmt.Sprintf("%s, %d engines", name, f.engines), Results: rs}
		if err := report.WriteHTML(f.report, in); err != nil {
			return fmt.Errorf("--report: %w", err)
		}
	}
	if f.json {
		return sim.WriteJSON(out, rs)
	}
	if err := sim.WriteTable(out, rs); err != nil {
		return err
	}
	if len(rs) > 0 {
		r := rs[0]
		fmt.Fprintf(out, "\nreferences (hit ratio of prompt blocks): infinite cache %.3f, pooled LRU of the fleet's capacity %.3f, clairvoyant placement %.3f\n",
			r.BoundHitRatio, r.PooledHitRatio, r.OracleHitRatio)
		fmt.Fprintf(out, "%d requests over %.0f simulated seconds; * marks the recommended policy\n", r.Requests, r.SimulatedSeconds)
	}
	return nil
}

// newSimGenCmd is `kvrouter sim gen`: write a generated workload as a
// Mooncake JSONL trace.
func newSimGenCmd() *cobra.Command {
	var workload, out string
	var seed uint64
	cmd := &cobra.Command{
		Use:   "gen",
		Short: "Write a generated workload (" + strings.Join(gen.Names(), ", ") + ") as a Mooncake JSONL trace",
		Long: `gen writes one of the generated workloads, with its published default parameters
(see sim/gen) and the given seed, as a Mooncake JSONL trace that sim --trace and other
tools read: chat (multi-turn conversations), tenants (shared system prompts), agentic
(tool loops on a long shared context) or rag (shared documents in different orders).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reqs, err := gen.Generate(workload, seed)
			if err != nil {
				return fmt.Errorf("--workload: %w", err)
			}
			if out != "" && out != "-" {
				f, err := os.Create(out)
				if err != nil {
					return fmt.Errorf("--out: %w", err)
				}
				defer f.Close()
				if err := gen.Write(f, reqs); err != nil {
					return fmt.Errorf("--out: %w", err)
				}
				return f.Close()
			}
			return gen.Write(cmd.OutOrStdout(), reqs)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&workload, "workload", "", "workload to generate: "+strings.Join(gen.Names(), ", "))
	fs.Uint64Var(&seed, "seed", 1, "seed of the generator")
	fs.StringVar(&out, "out", "", "file to write (default: standard output)")
	_ = cmd.MarkFlagRequired("workload")
	return cmd
}

// newSimOverloadCmd is `kvrouter sim overload`: the admission queue under
// offered load beyond capacity.
func newSimOverloadCmd() *cobra.Command {
	var (
		cfg   sim.OverloadConfig
		loads string
		js    bool
	)
	cmd := &cobra.Command{
		Use:   "overload",
		Short: "Offer load beyond the fleet's capacity and compare no queue, fcfs and wspt",
		Long: `overload measures the fleet's capacity on a mixed-length workload (75% 512-token,
25% 4096-token prompts, two policy classes weighted 3:1), then offers each --loads multiple
of it and routes through the real decision path with no queue (refuse when every engine is
busy), an fcfs queue and a wspt queue. Per run: goodput within --slo, TTFT p50/p99 per class,
each class's share of queued service while both were backlogged, and rejections.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runOverload(cmd, cfg, loads, js)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&cfg.Engines, "engines", 4, "number of simulated engines")
	fs.IntVar(&cfg.Requests, "requests", 2000, "requests offered per run")
	fs.StringVar(&loads, "loads", "1.5,3", "offered loads, comma-separated multiples of the measured capacity")
	fs.DurationVar(&cfg.SLO, "slo", 2*time.Second, "TTFT within which a request counts as goodput")
	fs.DurationVar(&cfg.MaxWait, "max-wait", 0, "refuse requests queued longer (0: serve every queued request)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the workload and tie-breaks")
	fs.BoolVar(&js, "json", false, "print a JSON array instead of a table")
	return cmd
}

func runOverload(cmd *cobra.Command, cfg sim.OverloadConfig, loads string, js bool) error {
	capacity, err := sim.MeasureCapacity(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	cfg.Capacity = capacity
	var out []sim.OverloadResult
	for l := range strings.SplitSeq(loads, ",") {
		load, err := strconv.ParseFloat(strings.TrimSpace(l), 64)
		if err != nil || !(load > 0) {
			return fmt.Errorf("--loads: %q is not a positive number", l)
		}
		for _, mode := range []string{sim.ModeNoQueue, sim.ModeFCFS, sim.ModeWSPT} {
			c := cfg
			c.Load, c.Mode = load, mode
			r, err := sim.Overload(cmd.Context(), c)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
	}
	w := cmd.OutOrStdout()
	if js {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	printOverload(w, capacity, cfg, out)
	return nil
}

// printOverload prints one row per run and class.
func printOverload(w io.Writer, capacity float64, cfg sim.OverloadConfig, rs []sim.OverloadResult) {
	fmt.Fprintf(w, "capacity %.1f req/s (%d engines); SLO %v; seed %d\n", capacity, cfg.Engines, cfg.SLO, cfg.Seed)
	fmt.Fprintf(w, "%-5s %-5s %9s %8s %9s %8s | %-8s %6s %8s %8s %9s %7s %8s\n",
		"load", "mode", "goodput/s", "good%", "meanTTFT", "rejected", "class", "weight", "p50 ms", "p99 ms", "finished", "share", "rejected")
	for _, r := range rs {
		for k, c := range r.Classes {
			head := fmt.Sprintf("%-5.1f %-5s %9.1f %7.1f%% %9.0f %8d", r.Load, r.Mode, r.GoodputRPS, 100*r.GoodFrac, r.TTFTMeanMs, r.Rejected)
			if k > 0 {
				head = fmt.Sprintf("%-5s %-5s %9s %8s %9s %8s", "", "", "", "", "", "")
			}
			share := "-"
			if r.Mode != sim.ModeNoQueue {
				share = fmt.Sprintf("%.3f", c.Share)
			}
			fmt.Fprintf(w, "%s | %-8s %6.2f %8.0f %8.0f %9d %7s %8d\n", head, c.Name, c.Weight, c.TTFTP50Ms, c.TTFTP99Ms, c.Finished, share, c.Rejected)
		}
	}
}
