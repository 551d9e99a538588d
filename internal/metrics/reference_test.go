package metrics

import (
	"io"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestReferenceFamiliesScraped scrapes the handler after some activity and
// checks that every reference family exists with the reference's label
// names, and that summing kvrouter's finer series keeps the totals.
func TestReferenceFamiliesScraped(t *testing.T) {
	m := New()
	m.SetIdentity("node-a", "dc1")
	m.Requests.WithLabelValues("llama", "/v1/chat/completions", "ok").Add(3)
	m.Requests.WithLabelValues("llama", "/v1/completions", "client_error").Add(2)
	m.TTFT.WithLabelValues("llama").Observe(0.2)
	m.ITL.WithLabelValues("llama").Observe(0.01)
	m.InputTokens.WithLabelValues("llama").Observe(512)
	m.OutputTokens.WithLabelValues("llama").Observe(64)
	m.PredictedHitRate.WithLabelValues("llama").Observe(0.5)
	for _, p := range []string{"hashing", "matching", "scheduling", "total"} {
		m.ObserveOverhead(p, time.Millisecond)
	}
	m.WorkerActiveDecodeBlocks.WithLabelValues("7", "0", "decode").Set(12)
	m.WorkerActivePrefillTokens.WithLabelValues("7", "0", "decode").Set(300)
	m.Event("stored", "ok")

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	fams := parse(t, rec.Body)
	want := map[string][]string{
		"dynamo_component_router_requests_total":              {"model"},
		"dynamo_component_router_time_to_first_token_seconds": {"model"},
		"dynamo_component_router_inter_token_latency_seconds": {"model"},
		"dynamo_component_router_input_sequence_tokens":       {"model"},
		"dynamo_component_router_output_sequence_tokens":      {"model"},
		"dynamo_component_router_kv_hit_rate":                 {"model"},
		"dynamo_router_overhead_block_hashing_ms":             {"dynamo_namespace", "router_id"},
		"dynamo_router_overhead_seq_hashing_ms":               {"dynamo_namespace", "router_id"},
		"dynamo_router_overhead_indexer_find_matches_ms":      {"dynamo_namespace", "router_id"},
		"dynamo_router_overhead_scheduling_ms":                {"dynamo_namespace", "router_id"},
		"dynamo_router_overhead_total_ms":                     {"dynamo_namespace", "router_id"},
		"dynamo_frontend_worker_active_decode_blocks":         {"dp_rank", "worker_id", "worker_type"},
		"dynamo_frontend_worker_active_prefill_tokens":        {"dp_rank", "worker_id", "worker_type"},
		"dynamo_component_kv_cache_events_applied":            {"event_type", "status"},
		"kvrouter_frontend_requests_total":                    {"endpoint", "model", "outcome"}, // kvrouter's own stay
	}
	for name, labels := range want {
		f, ok := fams[name]
		if !ok {
			t.Errorf("family %s missing", name)
			continue
		}
		for _, mt := range f.GetMetric() {
			var got []string
			for _, lp := range mt.GetLabel() {
				got = append(got, lp.GetName())
			}
			slices.Sort(got)
			if !slices.Equal(got, labels) {
				t.Errorf("%s: labels %v, want %v", name, got, labels)
			}
		}
	}
	if v := fams["dynamo_component_router_requests_total"].GetMetric()[0].GetCounter().GetValue(); v != 5 {
		t.Errorf("requests_total %v, want the sum 5 over endpoints and outcomes", v)
	}
	ov := fams["dynamo_router_overhead_total_ms"].GetMetric()[0]
	if ov.GetHistogram().GetSampleCount() != 1 || ov.GetLabel()[1].GetValue() != "node-a" {
		t.Errorf("overhead total: %v", ov)
	}
}

func parse(t *testing.T, r io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}
