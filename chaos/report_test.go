package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// gitSHA is the commit under test, read once by TestMain.
var gitSHA = "unknown"

func readGitSHA() {
	if out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		gitSHA = strings.TrimSpace(string(out))
	}
}

// report is the figures of one scenario run (reliability plan §2.2): it is
// written as report.json in the test's artifact directory (kept with
// `go test -artifacts`), summed up in one log line, and appended as a
// markdown table row to the file KVRTEST_CHAOS_REPORT names, if any.
type report struct {
	t        *testing.T
	Scenario string `json:"scenario"`
	Seed     uint64 `json:"seed"`
	GitSHA   string `json:"git_sha"`
	Topology string `json:"topology"`
	// FaultMS and HealMS are the fault's start and end, in ms since the
	// history's base (-1: none).
	FaultMS int64 `json:"fault_ms"`
	HealMS  int64 `json:"heal_ms"`
	// Ops counts the operations by outcome: ok, indeterminate, failed
	// (refused before reaching a node), or a scenario's own classes.
	Ops map[string]int `json:"ops"`
	// Verdicts is each checker's result: "ok" or what failed.
	Verdicts map[string]string `json:"verdicts"`
	// UnavailableMS are unavailability windows (fault → first new bind
	// acknowledged after it); ConvergeMS times to converge after a heal.
	UnavailableMS []int64 `json:"unavailable_ms,omitempty"`
	ConvergeMS    []int64 `json:"converge_ms,omitempty"`
	// Figures are the scenario's own figures (plan §2.3).
	Figures map[string]any `json:"figures,omitempty"`
	// Procs is the peak RSS (MiB), goroutines and open files per process.
	Procs map[string]*procPeak `json:"procs"`

	mu   sync.Mutex
	stop chan struct{}
	wg   sync.WaitGroup
}

// procPeak is one process's peaks over the run.
type procPeak struct {
	RSSMiB     float64 `json:"rss_mib"`
	Goroutines int     `json:"goroutines"`
	FDs        int     `json:"fds"`
}

// newReport starts the report of scenario; it is written when the test
// ends, pass or fail.
func newReport(t *testing.T, scenario, topology string) *report {
	r := &report{t: t, Scenario: scenario, Seed: seed(), GitSHA: gitSHA, Topology: topology,
		FaultMS: -1, HealMS: -1, Ops: map[string]int{}, Verdicts: map[string]string{},
		Figures: map[string]any{}, Procs: map[string]*procPeak{}, stop: make(chan struct{})}
	t.Logf("seed %d (KVRTEST_CHAOS_SEED replays it)", r.Seed)
	t.Cleanup(r.finish)
	return r
}

// watch samples the processes' RSS, open files and goroutines (the
// latter from metrics, the Go collector's go_goroutines) until the test
// ends. procs returns the live processes: name → pid and metrics URL.
func (r *report) watch(procs func() map[string]watched) {
	r.wg.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		c := http.Client{Timeout: 500 * time.Millisecond}
		for n := 0; ; n++ {
			for name, w := range procs() {
				rss, fds := procStat(w.pid)
				g := -1
				if n%4 == 0 && w.metrics != "" {
					g = int(scrapeGauge(&c, w.metrics, "go_goroutines"))
				}
				r.mu.Lock()
				p := r.Procs[name]
				if p == nil {
					p = &procPeak{}
					r.Procs[name] = p
				}
				p.RSSMiB, p.FDs, p.Goroutines = max(p.RSSMiB, rss), max(p.FDs, fds), max(p.Goroutines, g)
				r.mu.Unlock()
			}
			select {
			case <-r.stop:
				return
			case <-tick.C:
			}
		}
	})
}

// watched is a process the report samples.
type watched struct {
	pid     int
	metrics string
}

// watchDC samples d's node processes.
func (r *report) watchDC(d *dc) {
	r.watch(func() map[string]watched { return dcProcs(d) })
}

func dcProcs(d *dc) map[string]watched {
	out := map[string]watched{}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range d.members {
		if pid := m.pid(); pid != 0 {
			out[m.id] = watched{pid: pid, metrics: "http://" + m.http + "/metrics"}
		}
	}
	return out
}

// procStat reads a process's resident set (MiB) and open file count.
func procStat(pid int) (rssMiB float64, fds int) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				rssMiB = kb / 1024
			}
		}
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		fds = len(ents)
	}
	return rssMiB, fds
}

// scrapeGauge reads one unlabelled sample from a metrics page (-1 when
// absent or unreachable).
func scrapeGauge(c *http.Client, url, name string) float64 {
	resp, err := c.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// outcomes counts a bind history's operations by outcome.
func (r *report) outcomes(h *history) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range h.ops {
		switch {
		case o.unknown:
			r.Ops["indeterminate"]++
		default:
			r.Ops["ok"]++
		}
	}
	r.Ops["refused"] += int(h.refused.Load())
}

func (r *report) verdict(name, v string) {
	r.mu.Lock()
	r.Verdicts[name] = v
	r.mu.Unlock()
}

func (r *report) figure(name string, v any) {
	r.mu.Lock()
	r.Figures[name] = v
	r.mu.Unlock()
}

func (r *report) unavailable(d time.Duration) {
	r.mu.Lock()
	r.UnavailableMS = append(r.UnavailableMS, d.Milliseconds())
	r.mu.Unlock()
}

func (r *report) converged(d time.Duration) {
	r.mu.Lock()
	r.ConvergeMS = append(r.ConvergeMS, d.Milliseconds())
	r.mu.Unlock()
}

// finish stops the sampling and writes the report.
func (r *report) finish() {
	close(r.stop)
	r.wg.Wait()
	if r.t.Failed() {
		r.verdict("test", "FAILED")
	} else if r.t.Skipped() {
		return
	} else {
		r.verdict("test", "ok")
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	path := filepath.Join(r.t.ArtifactDir(), "report.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		r.t.Logf("report: %v", err)
	}
	row := r.row()
	r.t.Logf("REPORT %s (%s)", row, path)
	if f := os.Getenv("KVRTEST_CHAOS_REPORT"); f != "" {
		if out, err := os.OpenFile(f, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			_, _ = fmt.Fprintln(out, row)
			_ = out.Close()
		}
	}
}

// row is the report as a markdown table row: scenario, seed, ops,
// verdicts, unavailability, convergence, figures, peaks.
func (r *report) row() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var peakRSS float64
	var peakG, peakFD int
	for _, p := range r.Procs {
		peakRSS, peakG, peakFD = max(peakRSS, p.RSSMiB), max(peakG, p.Goroutines), max(peakFD, p.FDs)
	}
	return fmt.Sprintf("| %s | %d | %s | %s | %s | %s | %s | %s | %.0f MiB / %d / %d |",
		r.Scenario, r.Seed, r.GitSHA, kv(r.Ops), kv(r.Verdicts), msList(r.UnavailableMS), msList(r.ConvergeMS),
		kv(r.Figures), peakRSS, peakG, peakFD)
}

func kv[V any](m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func msList(ms []int64) string {
	if len(ms) == 0 {
		return "-"
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	if len(s) == 1 {
		return fmt.Sprintf("%d ms", s[0])
	}
	return fmt.Sprintf("max %d ms, p50 %d ms (n=%d)", s[len(s)-1], s[len(s)/2], len(s))
}
