package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/sim"
	"github.com/kvrouter/kvrouter/sim/report"
)

// The two policies whose ordering the demo states.
const (
	policyKV = "kv"
	policyRR = "round-robin"
)

// WriteComparison prints the live comparison's table, then one sentence
// on kv against round-robin when both ran.
func WriteComparison(w io.Writer, ss []Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\trequests\terrors\tcut by kill\thit ratio\tprefill tokens saved\tTTFT p50 ms\tTTFT p99 ms\treq/s\toutput tok/s\t")
	for _, s := range ss {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.3f\t%d\t%.1f\t%.1f\t%.1f\t%.0f\t\n", s.Policy, s.Requests, s.Errors, s.Cut, s.HitRatio,
			s.CachedTokens, ms(s.TTFTP50), ms(s.TTFTP99), s.ReqPerSec, s.TokPerSec)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range ss {
		if s.Event != "" {
			fmt.Fprintf(w, "%s: %s\n", s.Policy, s.Event)
		}
		if s.FirstError != nil {
			fmt.Fprintf(w, "%s: first error: %v\n", s.Policy, s.FirstError)
		}
	}
	fmt.Fprintln(w, "hit ratio: cached / prompt tokens as the engines reported them; TTFT: wall time at the replay's compression.")
	kv, rr, ok := pair(ss, func(s Summary) string { return s.Policy })
	if ok {
		fmt.Fprintf(w, "\n%s\n", verdict(float64(kv.CachedTokens), float64(rr.CachedTokens), ms(kv.TTFTP50), ms(rr.TTFTP50), ms(kv.TTFTP99), ms(rr.TTFTP99)))
	}
	return nil
}

// pair finds the kv and round-robin entries of xs.
func pair[T any](xs []T, name func(T) string) (kv, rr T, ok bool) {
	var hasKV, hasRR bool
	for _, x := range xs {
		switch name(x) {
		case policyKV:
			kv, hasKV = x, true
		case policyRR:
			rr, hasRR = x, true
		}
	}
	return kv, rr, hasKV && hasRR
}

// verdict states kv against round-robin in one sentence computed from the
// figures, whichever way they point.
func verdict(kvCached, rrCached, kvP50, rrP50, kvP99, rrP99 float64) string {
	served := fmt.Sprintf("kv served %.0f cached tokens where round-robin served none", kvCached)
	if rrCached > 0 {
		served = fmt.Sprintf("kv served %.1f× the cached tokens of round-robin", kvCached/rrCached)
	}
	return fmt.Sprintf("%s, %s TTFT p50 by %.0f%% and %s p99 by %.0f%%.",
		served, cutOrRaised(kvP50, rrP50), change(kvP50, rrP50), cutOrRaised(kvP99, rrP99), change(kvP99, rrP99))
}

func cutOrRaised(kv, rr float64) string {
	if kv <= rr {
		return "cut"
	}
	return "raised"
}

// change is |kv-rr|/rr in percent.
func change(kv, rr float64) float64 {
	if rr == 0 {
		return 0
	}
	d := (kv - rr) / rr * 100
	if d < 0 {
		d = -d
	}
	return d
}

// compareWithSim simulates the comparison's requests on the same fleet
// shape, prints the simulator's table and both orderings of kv and
// round-robin, and writes the HTML report.
func compareWithSim(ctx context.Context, cfg Config, live []Summary, out io.Writer) error {
	var pols []string
	known := map[string]bool{}
	for _, p := range sim.Policies() {
		known[p] = true
	}
	for _, p := range cfg.Policies {
		if known[p] {
			pols = append(pols, p)
		}
	}
	if len(pols) == 0 {
		return nil
	}
	scfg := sim.Config{Engines: cfg.Engines, Engine: mocker.Config{NumBlocks: cfg.NumBlocks}}
	rs, err := sim.Compare(ctx, cfg.Trace, pols, scfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nThe simulator on the same %d requests and fleet shape (virtual clock, trace time; hit ratio of prompt blocks):\n", len(cfg.Trace))
	if err := sim.WriteTable(out, rs); err != nil {
		return err
	}
	skv, srr, ok := pair(rs, func(r sim.Result) string { return r.Policy })
	lkv, lrr, lok := pair(live, func(s Summary) string { return s.Policy })
	if ok && lok {
		so := ordering(skv.HitRatio, srr.HitRatio, skv.TTFTP50Ms, srr.TTFTP50Ms)
		lo := ordering(lkv.HitRatio, lrr.HitRatio, ms(lkv.TTFTP50), ms(lrr.TTFTP50))
		agree := "agree"
		if so != lo {
			agree = "DISAGREE"
		}
		fmt.Fprintf(out, "\nkv vs round-robin: simulator %s; live %s: the orderings %s.\n", so, lo, agree)
	}
	return writeReport(cfg, rs, out)
}

// ordering names which of kv and round-robin leads in hit ratio and in
// TTFT p50.
func ordering(kvHit, rrHit, kvP50, rrP50 float64) string {
	hit, ttft := "kv > round-robin", "kv < round-robin"
	switch {
	case kvHit < rrHit:
		hit = "kv < round-robin"
	case kvHit == rrHit:
		hit = "kv = round-robin"
	}
	switch {
	case kvP50 > rrP50:
		ttft = "kv > round-robin"
	case kvP50 == rrP50:
		ttft = "kv = round-robin"
	}
	return "hit ratio " + hit + ", TTFT p50 " + ttft
}

func writeReport(cfg Config, rs []sim.Result, out io.Writer) error {
	dir := cfg.ReportDir
	if dir == "" {
		d, err := os.MkdirTemp("", "kvrouter-demo-report-")
		if err != nil {
			return err
		}
		dir = d
	}
	in := report.Inputs{Title: fmt.Sprintf("demo chat workload (%d requests), %d engines of %d blocks", len(cfg.Trace), cfg.Engines, cfg.NumBlocks), Results: rs}
	if err := report.WriteHTML(dir, in); err != nil {
		return fmt.Errorf("demo: report: %w", err)
	}
	fmt.Fprintf(out, "HTML report of the simulation: %s\n", filepath.Join(dir, "index.html"))
	return nil
}
