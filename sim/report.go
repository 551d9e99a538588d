package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Result is one policy's outcome on one workload. JSON keys are part of the
// command-line contract (`kvrouter sim --json`).
type Result struct {
	Policy   string `json:"policy"`
	Engines  int    `json:"engines"`
	Requests int    `json:"requests"`
	// Recommended marks the policy the README recommends.
	Recommended bool `json:"recommended,omitempty"`
	// HitRatio is the fraction of prompt blocks served from the engines'
	// prefix caches; BoundHitRatio is the infinite-cache bound of the
	// workload and HitOfBound their quotient.
	HitRatio      float64 `json:"hit_ratio"`
	BoundHitRatio float64 `json:"bound_hit_ratio"`
	HitOfBound    float64 `json:"hit_of_bound"`
	// PooledHitRatio is the hit ratio of one LRU cache of the whole
	// fleet's capacity and OracleHitRatio that of the clairvoyant
	// placement (see the package doc); HitOfPooled and HitOfOracle are the
	// policy's shares of them.
	PooledHitRatio float64 `json:"pooled_hit_ratio"`
	OracleHitRatio float64 `json:"oracle_hit_ratio"`
	HitOfPooled    float64 `json:"hit_of_pooled"`
	HitOfOracle    float64 `json:"hit_of_oracle"`
	TTFTMeanMs     float64 `json:"ttft_mean_ms"`
	TTFTP50Ms      float64 `json:"ttft_p50_ms"`
	TTFTP99Ms      float64 `json:"ttft_p99_ms"`
	ITLP50Ms       float64 `json:"itl_p50_ms"`
	ITLP99Ms       float64 `json:"itl_p99_ms"`
	// PrefillEngines is the prefill engines of a disaggregated replay
	// (the others decode); 0 for aggregated serving.
	PrefillEngines int `json:"prefill_engines,omitempty"`
	// LoadMaxOverMean is max/mean across engines of the prefill work done
	// (prompt tokens actually computed): 1 is a perfect balance.
	LoadMaxOverMean float64 `json:"load_max_over_mean"`
	// ThroughputTokPerS is output tokens per second of simulated time, from
	// the first arrival to the last completion.
	ThroughputTokPerS float64 `json:"throughput_tok_per_s"`
	ThroughputReqPerS float64 `json:"throughput_req_per_s"`
	// DecisionP50Us and DecisionP99Us are the wall-clock times of the routing
	// decisions (matching, load projection and selection) on this machine;
	// they are the only figures that vary from run to run.
	DecisionP50Us float64 `json:"decision_p50_us"`
	DecisionP99Us float64 `json:"decision_p99_us"`
	// SimulatedSeconds is the simulated span of the replay.
	SimulatedSeconds float64 `json:"simulated_seconds"`
	// Losses breaks down the blocks the policy missed against the pooled
	// reference (see Losses).
	Losses Losses `json:"losses"`
	// Detail is the per-decision trace and timeline, for reports; it is
	// not part of the JSON output.
	Detail *Detail `json:"-"`
}

// setReferences records the workload's references and the policy's share
// of each.
func (r *Result) setReferences(refs References) {
	r.BoundHitRatio, r.PooledHitRatio, r.OracleHitRatio = refs.Infinite, refs.Pooled, refs.Oracle
	share := func(ref float64) float64 {
		if ref <= 0 {
			return 0
		}
		return r.HitRatio / ref
	}
	r.HitOfBound, r.HitOfPooled, r.HitOfOracle = share(refs.Infinite), share(refs.Pooled), share(refs.Oracle)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// WriteTable prints results as an aligned table, one row per policy.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\thit ratio\tof bound\tof pooled\tof oracle\tTTFT mean ms\tTTFT p50 ms\tTTFT p99 ms\tITL p50 ms\tITL p99 ms\tload max/mean\ttok/s\tdecision p50 µs\tdecision p99 µs\t")
	for _, r := range rs {
		name := r.Policy
		if r.Recommended {
			name += " *"
		}
		if r.PrefillEngines > 0 {
			name += fmt.Sprintf(" (%dP+%dD)", r.PrefillEngines, r.Engines-r.PrefillEngines)
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.1f%%\t%.1f%%\t%.1f%%\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%.2f\t%.0f\t%.1f\t%.1f\t\n",
			name, r.HitRatio, 100*r.HitOfBound, 100*r.HitOfPooled, 100*r.HitOfOracle, r.TTFTMeanMs, r.TTFTP50Ms, r.TTFTP99Ms,
			r.ITLP50Ms, r.ITLP99Ms, r.LoadMaxOverMean, r.ThroughputTokPerS, r.DecisionP50Us, r.DecisionP99Us)
	}
	return tw.Flush()
}

// WriteJSON prints results as a JSON array.
func WriteJSON(w io.Writer, rs []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rs)
}
