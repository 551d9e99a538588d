package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/fleet/vllmevents"
	"github.com/kvrouter/kvrouter/internal/metrics"
)

// catalogue is a node's whole metric set, every vector primed, with the
// engine event source's families that a node registers when it follows
// engines' own event streams.
func catalogue(t *testing.T) *metrics.Metrics {
	t.Helper()
	m := metrics.New(metrics.WithConstLabels(prometheus.Labels{"dc": "dc1", "node": "n1"}))
	if _, err := vllmevents.NewMetrics(m.Registerer()); err != nil {
		t.Fatal(err)
	}
	if err := m.Prime(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMetricsPassLint runs promlint (what `promtool check metrics` runs)
// over every family of the registry: units in base units, counters ending
// in _total, help on every family.
func TestMetricsPassLint(t *testing.T) {
	problems, err := testutil.GatherAndLint(catalogue(t).Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
