package demo

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestLiveComparisonServesEveryRequest(t *testing.T) {
	if testing.Short() {
		// Two live fleets take tens of seconds; the node's end-to-end
		// tests cover the same paths in -short runs. A starved machine
		// slows the replay but fails no request: the engines' liveness
		// timeout is engineLiveness.
		t.Skip("replays 120 requests through a live fleet at 50x speed, twice")
	}
	ign := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ign) })
	// The chat workload's first 120 requests: later turns of the first
	// conversations resend their prefixes, at 50x within about a second.
	cfg := Config{HTTPAddr: "127.0.0.1:0", Engines: 2, Requests: 120, Compress: 50,
		Policies: []string{"kv", "round-robin"}, ReportDir: t.TempDir()}
	var out bytes.Buffer
	if err := Run(t.Context(), cfg, &out, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	report := out.String()
	t.Log("\n" + report)
	for _, p := range []string{"kv", "round-robin"} {
		var line string
		for l := range strings.SplitSeq(report, "\n") {
			if f := strings.Fields(l); len(f) == 10 && f[0] == p {
				line = l
				break
			}
		}
		// policy requests errors cut hit saved p50 p99 req/s tok/s
		f := strings.Fields(line)
		if len(f) != 10 || f[1] != "120" || f[2] != "0" || f[3] != "0" {
			t.Fatalf("policy %s: want 120 requests, 0 errors and 0 cut, got line %q", p, line)
		}
		if p == "kv" && f[5] == "0" {
			t.Fatalf("kv: no prefill saved on a workload of shared prefixes: %q", line)
		}
	}
	for _, want := range []string{"kv served ", "kv vs round-robin: simulator hit ratio", "HTML report of the simulation: "} {
		if !strings.Contains(report, want) {
			t.Fatalf("report lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.ReportDir, "index.html")); err != nil {
		t.Fatalf("no HTML report: %v", err)
	}
}

func TestVerdictStatesTheFigures(t *testing.T) {
	for _, c := range []struct {
		name                                 string
		kvC, rrC, kvP50, rrP50, kvP99, rrP99 float64
		want                                 string
	}{
		{"kv ahead", 310, 100, 58, 100, 500, 1000, "kv served 3.1× the cached tokens of round-robin, cut TTFT p50 by 42% and cut p99 by 50%."},
		{"kv behind", 90, 100, 120, 100, 1250, 1000, "kv served 0.9× the cached tokens of round-robin, raised TTFT p50 by 20% and raised p99 by 25%."},
		{"nothing cached by round-robin", 5, 0, 1, 1, 1, 1, "kv served 5 cached tokens where round-robin served none, cut TTFT p50 by 0% and cut p99 by 0%."},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := verdict(c.kvC, c.rrC, c.kvP50, c.rrP50, c.kvP99, c.rrP99); got != c.want {
				t.Fatalf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestOrderingNamesTheLeader(t *testing.T) {
	for _, c := range []struct {
		name                       string
		kvHit, rrHit, kvP50, rrP50 float64
		want                       string
	}{
		{"kv leads", 0.6, 0.3, 90, 200, "hit ratio kv > round-robin, TTFT p50 kv < round-robin"},
		{"round-robin leads", 0.3, 0.6, 200, 90, "hit ratio kv < round-robin, TTFT p50 kv > round-robin"},
		{"tie", 0.5, 0.5, 100, 100, "hit ratio kv = round-robin, TTFT p50 kv = round-robin"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ordering(c.kvHit, c.rrHit, c.kvP50, c.rrP50); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestConfigRejects(t *testing.T) {
	for _, c := range []Config{{Engines: -1}, {Requests: -5}, {Compress: -1}, {Compress: 5000}, {NumBlocks: -1}} {
		if _, err := c.withDefaults(); err == nil {
			t.Fatalf("accepted %+v", c)
		}
	}
}

// TestFederationReplay replays the start of the trace through two DCs'
// gateways: every request is served, some are forwarded to the other DC,
// and no session is served by two DCs or engines.
func TestFederationReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("two DCs of three router nodes each, relays and engines")
	}
	ign := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ign) })
	cfg := Config{HTTPAddr: "127.0.0.1:0", Engines: 4, Requests: 160, Compress: 50}
	var out bytes.Buffer
	if err := RunFederation(t.Context(), cfg, &out, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	report := out.String()
	t.Log("\n" + report)
	var all []string
	for l := range strings.SplitSeq(report, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "all" {
			all = f
		}
	}
	// ingress requests errors local forwarded hit-local hit-fwd p50 p99
	if len(all) != 9 || all[1] != "160" || all[2] != "0" || all[4] == "0" {
		t.Fatalf("want 160 requests, 0 errors and some forwarded, got %q", all)
	}
	if !strings.Contains(report, "(affinity violations): 0;") {
		t.Fatal("affinity violations in the federation replay")
	}
}
