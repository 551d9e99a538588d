package dispatch

import (
	"fmt"
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
	f.d.gauges(w1(1), "m")
	f.d.gauges(w1(2), "m").prefill.Set(5)
	series := func() int { return testutil.CollectAndCount(f.m.WorkerActivePrefillTokens) }
	if n := series(); n != 1 {
		t.Fatalf("%d series for one endpoint, want 1", n)
	}
	f.d.RemoveEngine(1)
	if n := series(); n != 1 {
		t.Fatalf("%d series after the old id left, want the new id's", n)
	}
	if v := testutil.ToFloat64(f.m.WorkerActivePrefillTokens.WithLabelValues("http://engine:8000", "0", "aggregated")); v != 5 {
		t.Fatalf("gauge %v, want the new id's 5", v)
	}
	f.d.RemoveEngine(2)
	if n := series(); n != 0 {
		t.Fatalf("%d series after both left, want 0", n)
	}
}

// TestDisaggWorkerTypeIsTheEnginesRole: the per-worker load gauges carry
// each engine's role, and the reference families' worker_type with them.
func TestDisaggWorkerTypeIsTheEnginesRole(t *testing.T) {
	f := disaggFixture(t, nil)
	dec := f.route(f.req(prompt(100, 640)))
	defer dec.Done(nil)
	want := map[string]string{endpointURL(dec.Prefill.Worker.ID): "prefill", endpointURL(dec.Worker.ID): "decode"}
	mfs, err := f.m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, mf := range mfs {
		if mf.GetName() != "dynamo_frontend_worker_active_prefill_tokens" && mf.GetName() != "kvrouter_worker_active_prefill_tokens" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			worker, role := labels["worker"]+labels["worker_id"], labels["role"]+labels["worker_type"]
			if role != want[worker] {
				t.Errorf("%s: worker %s has role %q, want %q", mf.GetName(), worker, role, want[worker])
			}
			seen++
		}
	}
	if seen != 4 {
		t.Fatalf("%d series of the two families, want the two engines' in each", seen)
	}
}

// endpointURL is a fake engine's default URL.
func endpointURL(id routing.WorkerID) string { return fmt.Sprintf("http://engine-%d:8000", id) }
