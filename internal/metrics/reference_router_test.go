package metrics

import (
	"net/http/httptest"
	"slices"
	"testing"
)

// TestReferenceDecisionAndQueueFamiliesScraped: the decision counters and
// the queue's families appear under the reference names with the
// reference's labels once the dispatcher registered them, and calling the
// registrations twice (a dispatcher rebuilt on the same registry) shares
// the counters.
func TestReferenceDecisionAndQueueFamiliesScraped(t *testing.T) {
	m := New()
	m.SetIdentity("node-a", "dc1")
	d, q := m.Decisions(), m.QueueMetrics()
	if d2, q2 := m.Decisions(), m.QueueMetrics(); d2.Routed != d.Routed || q2.Rejections != q.Rejections {
		t.Fatal("a second registration made new counters")
	}
	d.Routed.WithLabelValues("llama").Add(4)
	d.NonMaxOverlap.WithLabelValues("llama").Add(1)
	d.NonMaxOverlap.WithLabelValues("qwen").Add(2)
	d.Rejections.WithLabelValues("llama", "all_workers_overloaded").Add(2)
	d.Rejections.WithLabelValues("llama", "expired").Add(1)
	q.PendingRequests.WithLabelValues("llama", "premium").Set(3)
	q.PendingISLTokens.WithLabelValues("llama", "premium").Set(300)
	q.PendingCachedTokens.WithLabelValues("llama", "premium").Set(100)
	q.Rejections.WithLabelValues("llama", "premium", "request_queue_limit_per_worker").Inc()

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	fams := parse(t, rec.Body)
	queueLabels := []string{"dynamo_namespace", "model", "policy_class", "worker_type"}
	tests := []struct {
		name   string
		labels []string
		value  float64 // of the first series
	}{
		{"dynamo_component_router_requests_started_total", []string{"model"}, 4},
		{"dynamo_component_router_non_max_overlap_selections_total", []string{"worker_type"}, 3},
		{"dynamo_frontend_model_rejection_total", []string{"model"}, 3},
		{"dynamo_frontend_router_queue_pending_requests", queueLabels, 3},
		{"dynamo_frontend_router_queue_pending_isl_tokens", queueLabels, 300},
		{"dynamo_frontend_router_queue_pending_cached_tokens", queueLabels, 100},
		{"dynamo_frontend_router_queue_backpressure_total", []string{"dynamo_namespace", "model", "policy_class", "reason", "worker_type"}, 1},
		{"kvrouter_router_rejections_total", []string{"model", "reason"}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := fams[tc.name]
			if !ok || len(f.GetMetric()) == 0 {
				t.Fatalf("family missing")
			}
			mt := f.GetMetric()[0]
			var got []string
			for _, lp := range mt.GetLabel() {
				got = append(got, lp.GetName())
				if lp.GetName() == "dynamo_namespace" && lp.GetValue() != "dc1" {
					t.Errorf("dynamo_namespace %q, want dc1", lp.GetValue())
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.labels) {
				t.Errorf("labels %v, want %v", got, tc.labels)
			}
			v := mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
			if v != tc.value {
				t.Errorf("value %v, want %v", v, tc.value)
			}
		})
	}
}
