package inproc

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// report is one scenario run's figures, written as JSON.
type report struct {
	Scenario  string         `json:"scenario"`
	Seed      uint64         `json:"seed"`
	GitSHA    string         `json:"git_sha,omitempty"`
	Ops       map[string]int `json:"ops"`
	Verdicts  verdicts       `json:"verdicts"`
	Unavail   float64        `json:"unavailability_ms"`
	Converge  float64        `json:"time_to_converge_ms"`
	Duration  float64        `json:"duration_ms"`
	Goroutine int            `json:"goroutines_peak"`
	// Figures are the scenario's own (commit p99, detections, ...).
	Figures map[string]any `json:"figures,omitempty"`
}

// newReport starts a report for t's scenario.
func newReport(t *testing.T, scenario string, seed uint64) *report {
	return &report{Scenario: scenario, Seed: seed, GitSHA: os.Getenv("KVRTEST_GIT_SHA"), Figures: map[string]any{},
		Goroutine: runtime.NumGoroutine()}
}

// sample records the goroutine count's peak.
func (r *report) sample() { r.Goroutine = max(r.Goroutine, runtime.NumGoroutine()) }

// finish fills the outcome counts and verdicts, logs the report line,
// writes the JSON and fails t when an invariant does not hold.
func (r *report) finish(t *testing.T, ops []op, v verdicts, start time.Time) {
	t.Helper()
	r.sample()
	r.Ops = map[string]int{}
	for k, n := range counts(ops) {
		r.Ops[string(k)] = n
	}
	r.Verdicts = v
	r.Duration = ms(time.Since(start))
	t.Logf("report: scenario=%s seed=%d ok=%d fail=%d indeterminate=%d lost=%d unexpected=%d hashes_equal=%v unavailability=%.0fms converge=%.0fms goroutines_peak=%d figures=%v",
		r.Scenario, r.Seed, r.Ops["ok"], r.Ops["fail"], r.Ops["indeterminate"], v.Lost, v.Unexpected, v.HashesEqual,
		r.Unavail, r.Converge, r.Goroutine, r.Figures)
	r.write(t)
	if !v.ok() {
		t.Fatalf("invariants violated: %+v", v)
	}
	if r.Ops["ok"] == 0 {
		t.Fatal("no bind was acknowledged: the scenario proved nothing")
	}
}

// write stores the report as <scenario>.json in KVRTEST_CHAOS_REPORT_DIR or
// the test's temporary directory.
func (r *report) write(t *testing.T) {
	dir := os.Getenv("KVRTEST_CHAOS_REPORT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, r.Scenario+".json"), data, 0o644)
	}
	if err != nil {
		t.Errorf("writing the report: %v", err)
	}
}

// ms is d in milliseconds; a negative d (never happened) stays -1.
func ms(d time.Duration) float64 {
	if d < 0 {
		return -1
	}
	return float64(d.Microseconds()) / 1000
}

// seed returns KVRTEST_CHAOS_SEED or a fresh seed; reports print it.
func seed(t *testing.T) uint64 {
	if s := os.Getenv("KVRTEST_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("KVRTEST_CHAOS_SEED: %v", err)
		}
		return v
	}
	return uint64(time.Now().UnixNano())
}

// phase is a load phase's length: short by default, KVRTEST_CHAOS_SECONDS
// seconds under `make chaos`.
func phase(t *testing.T, short time.Duration) time.Duration {
	if s := os.Getenv("KVRTEST_CHAOS_SECONDS"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v <= 0 {
			t.Fatalf("KVRTEST_CHAOS_SECONDS: %q", s)
		}
		return time.Duration(v * float64(time.Second))
	}
	return short
}
