package metrics

import "github.com/prometheus/client_golang/prometheus"

// Serving holds the request-level families of the frontend beyond the
// counters and latencies of metrics.go: what is in flight, how long a
// request took end to end, and the prompt cache hit the engines report
// (usage.prompt_tokens_details.cached_tokens), to compare with the hit the
// router predicted (kvrouter_router_predicted_kv_hit_ratio).
type Serving struct {
	// InFlight is the number of completion requests being served.
	InFlight prometheus.Gauge
	// Duration is the time from a request's arrival to the end of its
	// answer (the last byte of a stream), by model, endpoint and outcome.
	Duration *prometheus.HistogramVec
	// EngineCachedTokens counts the prompt tokens engines reported as
	// served from their prefix cache, by model.
	EngineCachedTokens *prometheus.CounterVec
	// EngineHitRatio is the engine-reported cached share of each prompt
	// (cached_tokens / prompt_tokens), by model; observed only for answers
	// whose usage carries cached_tokens.
	EngineHitRatio *prometheus.HistogramVec
}

// hitRatioBuckets are the buckets of both hit ratios, predicted and
// reported, so that their histograms compare bucket by bucket.
var hitRatioBuckets = prometheus.LinearBuckets(0, 0.1, 11)

// newRequests builds and registers the request families.
func (m *Metrics) newRequests() Serving {
	r := Serving{
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kvrouter_frontend_requests_in_flight",
			Help: "Completion requests being served."}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kvrouter_frontend_request_duration_seconds",
			Help: "Time from a completion request's arrival to the end of its answer, by model, endpoint and outcome.", Buckets: latencyBuckets},
			[]string{"model", "endpoint", "outcome"}),
		EngineCachedTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_frontend_engine_cached_tokens_total",
			Help: "Prompt tokens the engines reported as served from their prefix cache (usage.prompt_tokens_details.cached_tokens)."},
			[]string{"model"}),
		EngineHitRatio: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kvrouter_frontend_engine_kv_hit_ratio",
			Help:    "Engine-reported cached share of each prompt (cached_tokens / prompt_tokens), to compare with kvrouter_router_predicted_kv_hit_ratio.",
			Buckets: hitRatioBuckets}, []string{"model"}),
	}
	for _, c := range []prometheus.Collector{r.InFlight, r.Duration, r.EngineCachedTokens, r.EngineHitRatio} {
		m.register(c)
	}
	return r
}
