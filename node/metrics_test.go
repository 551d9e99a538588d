package node_test

import (
	"bytes"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/node"
)

// scrape returns a node's /metrics page.
func (f *fleet) scrape() []byte {
	f.t.Helper()
	resp, err := http.Get(f.base + "/metrics")
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		f.t.Fatalf("GET /metrics: %d, %v", resp.StatusCode, err)
	}
	return b
}

// servedFleet is a node in dc "dc1" named "n7" with one engine that has
// served the same prompt twice (the second time from its cache).
func servedFleet(t *testing.T) *fleet {
	f := startFleet(t, 1, func(c *node.Config) { c.NodeID = "n7" })
	f.complete(seq(1, 64))
	if _, cached := f.complete(seq(1, 64)); cached == 0 {
		t.Fatal("the engine reported no cached tokens for a repeated prompt")
	}
	return f
}

// TestLiveMetricsPassPromtool runs `promtool check metrics` (Debian
// package prometheus) on a live node's page, when promtool is installed.
// The reference router's families (dynamo_*) keep the names its users'
// dashboards query, units in ms included, so promtool's remarks on them
// are left out; every kvrouter_* family must pass.
func TestLiveMetricsPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus)")
	}
	page := servedFleet(t).scrape()
	var own bytes.Buffer
	family := ""
	for _, line := range strings.SplitAfter(string(page), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && (f[1] == "HELP" || f[1] == "TYPE") {
			family = f[2]
		} else if len(f) > 0 && f[0] != "#" {
			family = f[0]
		}
		if !strings.HasPrefix(family, "dynamo_") {
			own.WriteString(line)
		}
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = &own
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestLiveMetricsLabelsAndCacheHits checks a live node's page: the dc and
// node labels on every kvrouter_* series, workers named by their endpoint
// URL, nothing left in flight, and the engine-reported cached tokens.
func TestLiveMetricsLabelsAndCacheHits(t *testing.T) {
	f := servedFleet(t)
	for _, line := range strings.Split(string(f.scrape()), "\n") {
		if !strings.HasPrefix(line, "kvrouter_") {
			continue
		}
		if !strings.Contains(line, `dc="dc1"`) || !strings.Contains(line, `node="n7"`) {
			t.Errorf("series without dc and node labels: %s", line)
		}
		if strings.HasPrefix(line, "kvrouter_worker_") && !strings.Contains(line, `worker="http://127.0.0.1:`) {
			t.Errorf("worker not named by its endpoint URL: %s", line)
		}
	}
	m := f.node.Metrics()
	if n := testutil.ToFloat64(m.Serving.InFlight); n != 0 {
		t.Errorf("%v requests in flight after the last answer", n)
	}
	if n := testutil.ToFloat64(m.Serving.EngineCachedTokens.WithLabelValues(model)); n <= 0 {
		t.Errorf("engine-reported cached tokens %v, want > 0 after a repeated prompt", n)
	}
	if n := testutil.CollectAndCount(m.Serving.EngineHitRatio); n != 1 {
		t.Errorf("%d engine hit ratio series, want 1", n)
	}
}

// TestSmallFleetMetricsPageStaysSmall: a node with one engine that served
// a few requests of one endpoint lists one request-duration histogram
// (the endpoint and outcome that happened), not one per endpoint and
// outcome of every model, and its whole page stays far under the 230 KB
// that eager histograms once made of it.
func TestSmallFleetMetricsPageStaysSmall(t *testing.T) {
	page := servedFleet(t).scrape()
	if n := bytes.Count(page, []byte("kvrouter_frontend_request_duration_seconds_count{")); n != 1 {
		t.Errorf("%d request-duration series after completions that all succeeded, want 1", n)
	}
	const maxPageBytes = 100 << 10
	if len(page) > maxPageBytes {
		t.Errorf("/metrics is %d bytes for one engine and two requests, want at most %d", len(page), maxPageBytes)
	}
}
