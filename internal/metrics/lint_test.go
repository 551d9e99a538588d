package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/fleet/vllmevents"
	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/relay/gateway"
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
// over every family of the node's and the relay gateway's registries:
// units in base units, counters ending in _total, help on every family.
func TestMetricsPassLint(t *testing.T) {
	tests := []struct {
		name string
		g    prometheus.Gatherer
	}{
		{name: "node", g: catalogue(t).Registry},
		{name: "relay gateway", g: gateway.NewMetrics(prometheus.Labels{"dc": "dc1", "relay": "r1"}).Registry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			problems, err := testutil.GatherAndLint(tc.g)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("%s: %s", p.Metric, p.Text)
			}
		})
	}
}
