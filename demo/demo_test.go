package demo

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/kvrouter/kvrouter/traces"
)

func TestLiveReplayServesEveryRequest(t *testing.T) {
	if testing.Short() {
		// Under the race detector (make test runs it with -short) the
		// 50x-speed fleet starves its own heartbeats on two cores, so
		// engines expire by design mid-replay; the node's end-to-end tests
		// cover the same paths under -race.
		t.Skip("replays 240 requests through a live fleet at 50x speed")
	}
	ign := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ign) })
	reqs, err := traces.ReadBytes(traces.MooncakeSynthetic)
	if err != nil {
		t.Fatal(err)
	}
	// 120 requests share prefixes (the trace's hash ids 0.. recur), at 50x
	// they arrive within about a second.
	cfg := Config{HTTPAddr: "127.0.0.1:0", Engines: 2, Requests: 120, Compress: 50, Trace: reqs}
	var out bytes.Buffer
	if err := Run(t.Context(), cfg, &out, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	report := out.String()
	t.Log("\n" + report)
	for _, p := range []string{"kv", "round-robin"} {
		var line string
		for l := range strings.SplitSeq(report, "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[0] == p {
				line = l
			}
		}
		// policy requests errors cut hit p50 p99 req/s tok/s sessions violations
		f := strings.Fields(line)
		if len(f) != 11 || f[1] != "120" || f[2] != "0" || f[10] != "0" {
			t.Fatalf("policy %s: want 120 requests, 0 errors and 0 affinity violations, got line %q", p, line)
		}
		if f[9] == "0" {
			t.Fatalf("policy %s: no session served twice, so affinity was not exercised: %q", p, line)
		}
	}
}

func TestConfigRejects(t *testing.T) {
	for _, c := range []Config{{Engines: -1}, {Requests: -5}, {Compress: -1}, {Compress: 5000}} {
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
