package dispatch

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/routing"
)

// TestWorkerGaugesSurviveARestartOnTheSameEndpoint: an engine that
// restarts with a new id on the same endpoint shares its gauges' labels
// with the old id until that is removed; removing the old id leaves the
// gauges to the new one, and removing the new one deletes them.
func TestWorkerGaugesSurviveARestartOnTheSameEndpoint(t *testing.T) {
	f := newFixture(t, 2, nil)
	f.engines.urls = map[routing.WorkerID]string{1: "http://engine:8000/", 2: "http://engine:8000"}
	f.d.gauges(w1(1))
	f.d.gauges(w1(2)).prefill.Set(5)
	series := func() int { return testutil.CollectAndCount(f.m.WorkerActivePrefillTokens) }
	if n := series(); n != 1 {
		t.Fatalf("%d series for one endpoint, want 1", n)
	}
	f.d.RemoveEngine(1)
	if n := series(); n != 1 {
		t.Fatalf("%d series after the old id left, want the new id's", n)
	}
	if v := testutil.ToFloat64(f.m.WorkerActivePrefillTokens.WithLabelValues("http://engine:8000", "0")); v != 5 {
		t.Fatalf("gauge %v, want the new id's 5", v)
	}
	f.d.RemoveEngine(2)
	if n := series(); n != 0 {
		t.Fatalf("%d series after both left, want 0", n)
	}
}
