package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kvrouter/kvrouter/routing/policy"
	"github.com/kvrouter/kvrouter/traces"
)

// sweepTraces are the workloads every parameter is swept on: the bundled
// trace and every generated one (traces/README.md).
var sweepTraces = []string{"mooncake_synthetic", "chat", "tenants", "agentic", "rag"}

// TestSweepKVTTFT sweeps each knob of the kv-ttft selector around its
// default, one at a time, on every workload with 8 engines, and prints one
// line per (knob value, workload). It takes minutes, so it runs only when
// KVRTEST_SWEEP is set:
//
//	KVRTEST_SWEEP=1 go test ./sim -run TestSweepKVTTFT -v -timeout 30m
func TestSweepKVTTFT(t *testing.T) {
	if os.Getenv("KVRTEST_SWEEP") == "" {
		t.Skip("set KVRTEST_SWEEP=1 to sweep the kv-ttft knobs")
	}
	pts := sweepPoints(policy.DefaultKVTTFTConfig())
	lines := make([]string, len(pts)*len(sweepTraces))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for ti, name := range sweepTraces {
		reqs := readTrace(t, name)
		for pi, pt := range pts {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				cfg := Config{Engines: 8, KVTTFT: &pt.cfg, Seed: pt.seed}
				rs, err := Compare(context.Background(), reqs, []string{policy.NameKVTTFT}, cfg)
				if err != nil {
					t.Error(err)
					return
				}
				r := rs[0]
				lines[pi*len(sweepTraces)+ti] = fmt.Sprintf("%-22s %-18s hit %.3f of pooled %.2f TTFT mean %5.0f p99 %6.0f load %.2f",
					pt.knob, name, r.HitRatio, r.HitOfPooled, r.TTFTMeanMs, r.TTFTP99Ms, r.LoadMaxOverMean)
			})
		}
	}
	wg.Wait()
	t.Log("\n" + strings.Join(lines, "\n"))
}

// sweepPoint is one configuration of the sweep, with the seed of the
// selectors' tie-breaks (0: the default).
type sweepPoint struct {
	knob string
	cfg  policy.KVTTFTConfig
	seed uint64
}

// sweepPoints varies each knob of def alone, then replays def under two
// more tie-break seeds: the replays are chaotic (one tie broken the other
// way moves a session), so a difference no larger than the seeds' spread
// is noise.
func sweepPoints(def policy.KVTTFTConfig) []sweepPoint {
	var pts []sweepPoint
	vary := func(knob string, vs []float64, set func(*policy.KVTTFTConfig, float64)) {
		for _, v := range vs {
			c := def
			set(&c, v)
			pts = append(pts, sweepPoint{knob: fmt.Sprintf("%s=%g", knob, v), cfg: c})
		}
	}
	vary("session_credit", []float64{1, 1.25, 1.5, 2}, func(c *policy.KVTTFTConfig, v float64) { c.SessionCredit = v })
	vary("decode_weight", []float64{0, 0.05, 0.1, 0.25, 0.5}, func(c *policy.KVTTFTConfig, v float64) { c.DecodeWeight = v })
	vary("headroom", []float64{0.8, 0.9, 1}, func(c *policy.KVTTFTConfig, v float64) { c.Headroom = v })
	vary("balance_weight", []float64{0, 0.1, 0.25, 0.5, 1, 2}, func(c *policy.KVTTFTConfig, v float64) { c.BalanceWeight = v })
	vary("balance_limit", []float64{1, 1.1, 1.2}, func(c *policy.KVTTFTConfig, v float64) { c.BalanceLimit = v })
	vary("balance_window", []float64{500, 1000, 2000, 5000}, func(c *policy.KVTTFTConfig, v float64) { c.BalanceWindow = v })
	for _, seed := range []uint64{2, 3} {
		pts = append(pts, sweepPoint{knob: fmt.Sprintf("defaults, seed %d", seed), cfg: def, seed: seed})
	}
	return pts
}

// readTrace reads a committed trace by name.
func readTrace(t *testing.T, name string) []traces.Request {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "traces", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := traces.ReadBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

// The recommended selector keeps the agentic workload's prefill work
// balanced (docs/routing-quality.md): sessions of one agent type used to
// pile onto the engines holding that agent's context. Seed 1, as the
// acceptance figures.
func TestKVTTFTBalancesAgentic(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a 2,281-request trace")
	}
	rs, err := Compare(context.Background(), readTrace(t, "agentic"), []string{policy.NameKVTTFT}, Config{Engines: 8})
	if err != nil {
		t.Fatal(err)
	}
	if r := rs[0]; r.LoadMaxOverMean > 1.3 || r.HitOfPooled < 0.85 {
		t.Errorf("load max/mean %.2f (want <= 1.3), of pooled %.2f (want >= 0.85)", r.LoadMaxOverMean, r.HitOfPooled)
	}
}
