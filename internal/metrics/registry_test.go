package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/internal/metrics"
)

// TestConstLabelsAndPrime checks that every kvrouter_* family of a set
// carries the constant labels, including families registered later
// through Registerer, and that Prime gives vectors a series.
func TestConstLabelsAndPrime(t *testing.T) {
	m := metrics.New(metrics.WithConstLabels(prometheus.Labels{"dc": "west", "node": "n2"}))
	extra := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_test_things_total", Help: "Things."}, []string{"kind", "c"})
	m.Registerer().MustRegister(extra)
	if n := testutil.CollectAndCount(extra); n != 0 {
		t.Fatalf("%d series before Prime", n)
	}
	if err := m.Prime(); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(extra.WithLabelValues("<kind>", "<c>")); n != 0 {
		t.Fatalf("primed series %v", n)
	}
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	families := 0
	for _, mf := range mfs {
		if mf.GetName()[:3] != "kvr" {
			continue
		}
		families++
		for _, s := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range s.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			if got["dc"] != "west" || got["node"] != "n2" {
				t.Errorf("%s: labels %v, want dc=west node=n2", mf.GetName(), got)
			}
		}
	}
	if families < 20 {
		t.Errorf("%d kvrouter families gathered after Prime, want every one", families)
	}
}
