package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvrouter/kvrouter/sim"
)

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
