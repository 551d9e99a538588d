package peers

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Env describes where a run happened, for the report's header.
type Env struct {
	PeerVersion string
	Go          string
	CPU         string
	CPUs        int
	LoadBefore  string
	LoadAfter   string
}

// figure is one row of the report: a value taken from the results of one
// mode, whether more is better (throughput) or worse (time, bytes), and
// whether a ratio to kvrouter means anything (not for a fixed cost that is
// about zero for kvrouter).
type figure struct {
	name    string
	mode    Mode
	more    bool
	noRatio bool
	format  string
	value   func(Result) float64
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

var figures = []figure{
	{"ingest, keys precomputed (M block events/s)", ModeKeys, true, false, "%.2f", func(r Result) float64 { return r.BlockEventsPerSec / 1e6 }},
	{"ingest from tokens, hashing included (M block events/s)", ModeTokens, true, false, "%.2f", func(r Result) float64 { return r.BlockEventsPerSec / 1e6 }},
	{"heap in use per (worker, block) pair (B)", ModeKeys, false, false, "%.1f", func(r Result) float64 { return r.InuseBytesPerPair }},
	{"live heap per pair (B)", ModeKeys, false, false, "%.1f", func(r Result) float64 { return r.LiveBytesPerPair }},
	{"heap of the empty index (MiB)", ModeKeys, false, true, "%.1f", func(r Result) float64 { return max(0, float64(r.FixedBytes)) / (1 << 20) }},
	{"find-matches, full hit, p50 (µs)", ModeKeys, false, false, "%.2f", func(r Result) float64 { return us(r.QueryP50) }},
	{"find-matches, full hit, p99 (µs)", ModeKeys, false, false, "%.2f", func(r Result) float64 { return us(r.QueryP99) }},
	{"find-matches, mean (µs)", ModeKeys, false, false, "%.2f", func(r Result) float64 { return us(r.QueryMean) }},
	{"query keys from its tokens, p50 (µs)", ModeKeys, false, false, "%.2f", func(r Result) float64 { return us(r.HashP50) }},
}

// Report writes the header, one row per figure with each subject's range
// over the rounds and, for the peers, the range of kvrouter's advantage
// computed round by round (how many times faster or smaller kvrouter was
// in the same round), then the answer checks.
func Report(w io.Writer, cfg Config, env Env, results []Result) error {
	s := cfg.Shape
	fmt.Fprintf(w, "peers: seed %d; %d workers, %d (worker, block) pairs from %d block events of %d tokens; %d queries, each a full hit of %d blocks for one worker; %d rounds, interleaved\n",
		s.Seed, s.Workers, s.Pairs(), s.Blocks(), s.BlockTokens, s.Queries, s.SeqBlocks, cfg.Rounds)
	fmt.Fprintf(w, "llm-d-kv-cache %s; %s; %s, %d CPUs; load average %s before, %s after\n\n",
		env.PeerVersion, env.Go, env.CPU, env.CPUs, env.LoadBefore, env.LoadAfter)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\t%s\n", strings.Join(Names(), "\t"))
	for _, f := range figures {
		cells := []string{f.name}
		for _, name := range Names() {
			cells = append(cells, cell(f, results, name))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\n(× is kvrouter's advantage over the peer in the same round: its throughput ratio, or the peer's time or bytes over kvrouter's)")
	return reportChecks(w, results)
}

// cell formats one subject's range for a figure and, for a peer, the
// range of kvrouter's advantage.
func cell(f figure, results []Result, name string) string {
	var vals, adv []float64
	for _, r := range results {
		if r.Subject != name || r.Mode != f.mode {
			continue
		}
		v := f.value(r)
		vals = append(vals, v)
		if base, ok := baseline(results, f.mode, r.Round); ok && name != NameKVRouter && !f.noRatio {
			adv = append(adv, advantage(f, f.value(base), v))
		}
	}
	out := span(f.format, vals)
	if len(adv) > 0 {
		out += " (" + span("%.1f", adv) + "×)"
	}
	return out
}

// advantage is how many times better kvrouter's value is than the peer's.
func advantage(f figure, kvr, peer float64) float64 {
	if f.more {
		return kvr / peer
	}
	return peer / kvr
}

// baseline returns kvrouter's result of the same mode and round.
func baseline(results []Result, mode Mode, round int) (Result, bool) {
	for _, r := range results {
		if r.Subject == NameKVRouter && r.Mode == mode && r.Round == round {
			return r, true
		}
	}
	return Result{}, false
}

// span formats the range of vals as "lo–hi", or one value.
func span(format string, vals []float64) string {
	if len(vals) == 0 {
		return "—"
	}
	lo, hi := slices.Min(vals), slices.Max(vals)
	a, b := fmt.Sprintf(format, lo), fmt.Sprintf(format, hi)
	if a == b {
		return a
	}
	return a + "–" + b
}

// reportChecks writes how many answers each subject gave as expected.
func reportChecks(w io.Writer, results []Result) error {
	for _, r := range results {
		if r.Mode != ModeKeys {
			continue
		}
		fmt.Fprintf(w, "round %d %-9s answers checked %d, mismatches %d", r.Round, r.Subject, r.Checked, r.Mismatches)
		if r.FirstMismatch != "" {
			fmt.Fprintf(w, " (first: %s)", r.FirstMismatch)
		}
		fmt.Fprintln(w)
	}
	_, err := fmt.Fprintln(w)
	return err
}
