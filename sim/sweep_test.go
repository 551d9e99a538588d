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
// KVR_SWEEP is set:
//
//	KVR_SWEEP=1 go test ./sim -run TestSweepKVTTFT -v -timeout 30m
func TestSweepKVTTFT(t *testing.T) {
	if os.Getenv("KVR_SWEEP") == "" {
		t.Skip("set KVR_SWEEP=1 to sweep the kv-ttft knobs")
	}
	type point struct {
		knob string
		cfg  policy.KVTTFTConfig
	}
	var pts []point
	def := policy.DefaultKVTTFTConfig()
	for _, v := range []float64{1, 1.25, 1.5, 2} {
		c := def
		c.SessionCredit = v
		pts = append(pts, point{fmt.Sprintf("session_credit=%g", v), c})
	}
	for _, v := range []float64{0, 0.05, 0.1, 0.25, 0.5, 1} {
		c := def
		c.DecodeWeight = v
		pts = append(pts, point{fmt.Sprintf("decode_weight=%g", v), c})
	}
	for _, v := range []float64{0.7, 0.8, 0.9, 1} {
		c := def
		c.Headroom = v
		pts = append(pts, point{fmt.Sprintf("headroom=%g", v), c})
	}
	lines := make([]string, len(pts)*len(sweepTraces))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for ti, name := range sweepTraces {
		reqs := readTrace(t, name)
		for pi, pt := range pts {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				cfg := Config{Engines: 8, KVTTFT: &pt.cfg}
				rs, err := Compare(context.Background(), reqs, []string{policy.NameKVTTFT}, cfg)
				if err != nil {
					t.Error(err)
					return
				}
				r := rs[0]
				lines[pi*len(sweepTraces)+ti] = fmt.Sprintf("%-20s %-18s hit %.3f of pooled %.2f TTFT mean %5.0f p99 %6.0f load %.2f",
					pt.knob, name, r.HitRatio, r.HitOfPooled, r.TTFTMeanMs, r.TTFTP99Ms, r.LoadMaxOverMean)
			})
		}
	}
	wg.Wait()
	t.Log("\n" + strings.Join(lines, "\n"))
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
