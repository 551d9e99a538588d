package metrics_test

import (
	"strings"
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
	// Families the node's components register when they start.
	metrics.NewEdge(m.Registerer())
	metrics.NewBodies(m.Registerer(), nil)
	m.QueueMetrics()
	m.Decisions()
	metrics.NewRebuilds(m.Registerer())
	metrics.NewSelection(m.Registerer())
	if err := m.Prime(); err != nil {
		t.Fatal(err)
	}
	return m
}

// relayCatalogue is a relay gateway's registry with every family it
// registers, each with one primed series.
func relayCatalogue(t *testing.T, name string) *prometheus.Registry {
	t.Helper()
	g := gateway.NewMetrics(prometheus.Labels{"dc": "dc1", "relay": name})
	edge := metrics.NewEdge(g.Registerer())
	metrics.NewBodies(g.Registerer(), nil)
	sec := metrics.NewSecurity(nil)
	sec.Register(g.Registerer())
	for _, c := range []prometheus.Collector{edge.AuthRefusals, edge.CertReloads, sec.Refusals, sec.EventsRefused, sec.ResyncBackoffs} {
		if err := metrics.Prime(c); err != nil {
			t.Fatal(err)
		}
	}
	return g.Registry
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
		{name: "relay gateway", g: relayCatalogue(t, "r1")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			problems, err := testutil.GatherAndLint(tc.g)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				if strings.HasPrefix(p.Metric, "dynamo_") {
					continue // the reference router's names, kept exactly as it spells them
				}
				t.Errorf("%s: %s", p.Metric, p.Text)
			}
		})
	}
}
