package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is the node's metric set on its own registry.
type Metrics struct {
	Registry *prometheus.Registry
	// constLabels go on every series registered through Registerer.
	constLabels prometheus.Labels
	families    families
	// Serving holds the in-flight, duration and engine-reported cache
	// families (requests.go).
	Serving Serving

	// Requests counts finished client requests by model, endpoint and
	// outcome ("ok", "client_error", "server_error", "canceled").
	Requests *prometheus.CounterVec
	// TTFT and ITL are client-observed latencies through the router.
	TTFT *prometheus.HistogramVec
	ITL  *prometheus.HistogramVec
	// InputTokens and OutputTokens are per-request token counts.
	InputTokens  *prometheus.HistogramVec
	OutputTokens *prometheus.HistogramVec
	// Tokenized counts routed requests by how their tokens were known:
	// "client" (token ids in the request), "exact" (the model's
	// tokenizer), "approximate" (no tokenizer: text blocks) or "failed"
	// (the tokenizer refused it: text blocks).
	Tokenized *prometheus.CounterVec
	// PredictedHitRate is the routed worker's cached share of the prompt.
	PredictedHitRate *prometheus.HistogramVec
	// Overhead is the routing overhead by phase: "hashing", "matching",
	// "scheduling" and "total".
	Overhead *prometheus.HistogramVec
	// EngineUnreachable counts requests whose chosen engine could not be
	// reached (nothing was sent); each is routed once more, elsewhere.
	EngineUnreachable prometheus.Counter

	// WorkerActivePrefillTokens and WorkerActiveDecodeBlocks are the
	// router's projected load per engine rank.
	WorkerActivePrefillTokens *prometheus.GaugeVec
	WorkerActiveDecodeBlocks  *prometheus.GaugeVec
	// Workers is the number of live engine ranks.
	Workers prometheus.Gauge

	// EventsApplied counts KV events by kind and status ("ok", "stale",
	// "gap", "unknown_parent", "malformed").
	EventsApplied *prometheus.CounterVec
	// EventGaps counts detected gaps; Resyncs counts snapshot resyncs by
	// outcome ("ok", "error").
	EventGaps prometheus.Counter
	Resyncs   *prometheus.CounterVec
	// EngineProbeFailures counts failed probes of declared engines by
	// reason (unreachable, unhealthy, model_not_served,
	// block_size_mismatch, metrics_scrape, dns).
	EngineProbeFailures *prometheus.CounterVec
	// NATSConnected is 1 while the node's NATS connection is up.
	NATSConnected prometheus.Gauge

	// SessionBindings is the number of live session bindings; AffinityEvents
	// counts binds, hits, rebinds, invalidations and expiries.
	SessionBindings prometheus.Gauge
	AffinityEvents  *prometheus.CounterVec

	// RaftIndexErrors counts KV events the raft FSM applied to its tables
	// whose outcome in the in-memory exact index differed; each made the
	// FSM rebuild the rank's index from its tables.
	RaftIndexErrors prometheus.Counter

	EngineSecurity
	// Security counts refused attacks (see cluster_security.go).
	Security *Security
	// reference re-exports families under the reference router's names
	// (reference.go).
	reference *referenceCollector

	// Storage is the durable stores' family (storage.go); the node passes
	// it to its stores as their store.Observer.
	Storage *Storage
}

// latencyBuckets span 1 ms to about 65 s.
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 17)

// overheadBuckets span 1 µs to about 65 ms.
var overheadBuckets = prometheus.ExponentialBuckets(1e-6, 2, 17)

var tokenBuckets = prometheus.ExponentialBuckets(16, 2, 15)

// New builds the metric set on a fresh registry, with the Go runtime and
// process collectors.
func New(opts ...Option) *Metrics {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{Registry: r}
	for _, o := range opts {
		o(m)
	}
	f := m.register
	m.Requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_frontend_requests_total", Help: "Client requests by model, endpoint and outcome."}, []string{"model", "endpoint", "outcome"})
	m.TTFT = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kvrouter_frontend_time_to_first_token_seconds", Help: "Time from request arrival to the first streamed token.", Buckets: latencyBuckets}, []string{"model"})
	m.ITL = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kvrouter_frontend_inter_token_latency_seconds", Help: "Mean time between streamed tokens of a request.", Buckets: latencyBuckets}, []string{"model"})
	m.InputTokens = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kvrouter_frontend_input_tokens", Help: "Prompt tokens per request.", Buckets: tokenBuckets}, []string{"model"})
	m.OutputTokens = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kvrouter_frontend_output_tokens", Help: "Generated tokens per request.", Buckets: tokenBuckets}, []string{"model"})
	m.Tokenized = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_frontend_tokenized_total", Help: "Routed requests by how their tokens were known (client, exact, approximate, failed)."}, []string{"outcome"})
	m.PredictedHitRate = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kvrouter_router_predicted_kv_hit_ratio", Help: "Share of the prompt's blocks cached on the chosen worker, as the index predicted.", Buckets: hitRatioBuckets}, []string{"model"})
	m.Overhead = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kvrouter_router_overhead_seconds", Help: "Routing overhead by phase (hashing, matching, scheduling, total).", Buckets: overheadBuckets}, []string{"phase"})
	m.EngineUnreachable = prometheus.NewCounter(prometheus.CounterOpts{Name: "kvrouter_router_engine_unreachable_total", Help: "Requests whose chosen engine could not be reached (refused the connection, or closed the connections the request was written on twice), each routed once more elsewhere."})
	m.WorkerActivePrefillTokens = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kvrouter_worker_active_prefill_tokens", Help: "Prompt tokens routed to the worker rank and not yet prefilled; role is the engine's (aggregated, prefill, decode)."}, []string{"worker", "rank", "role"})
	m.WorkerActiveDecodeBlocks = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kvrouter_worker_active_decode_blocks", Help: "KV blocks held by active requests on the worker rank; role is the engine's (aggregated, prefill, decode)."}, []string{"worker", "rank", "role"})
	m.Workers = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kvrouter_workers", Help: "Live engine ranks."})
	m.EventsApplied = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_events_applied_total", Help: "KV events handled by kind and status."}, []string{"kind", "status"})
	m.EventGaps = prometheus.NewCounter(prometheus.CounterOpts{Name: "kvrouter_events_gaps_total", Help: "Gaps detected in engines' KV event streams."})
	m.Resyncs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_events_resyncs_total", Help: "Snapshot resyncs of an engine rank by outcome."}, []string{"outcome"})
	m.EngineProbeFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_engine_probe_failures_total", Help: "Failed probes of declared engines (static entries or DNS discovery) by reason."}, []string{"reason"})
	m.NATSConnected = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kvrouter_nats_connected", Help: "1 while the NATS connection is up."})
	m.SessionBindings = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kvrouter_affinity_bindings", Help: "Live session bindings."})
	m.AffinityEvents = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_affinity_events_total", Help: "Session affinity events (bind, hit, rebind, invalidate, expire, unbind)."}, []string{"event"})
	for _, c := range []prometheus.Collector{m.Requests, m.TTFT, m.ITL, m.InputTokens, m.OutputTokens, m.Tokenized, m.PredictedHitRate,
		m.Overhead, m.EngineUnreachable, m.WorkerActivePrefillTokens, m.WorkerActiveDecodeBlocks, m.Workers, m.EventsApplied, m.EventGaps,
		m.Resyncs, m.EngineProbeFailures, m.NATSConnected, m.SessionBindings, m.AffinityEvents} {
		f(c)
	}
	m.RaftIndexErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "kvrouter_raft_index_errors_total", Help: "KV events whose exact-index outcome differed from the raft FSM's tables, each followed by a rebuild of the rank's index."})
	f(m.RaftIndexErrors)
	m.registerEngineSecurity(f)
	m.Security = NewSecurity(m.Registerer())
	m.reference = newReferenceCollector(m)
	f(m.reference)
	m.Serving = m.newRequests()
	m.Storage = NewStorage(m.Registerer())
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// ObserveOverhead records one routing phase's duration.
func (m *Metrics) ObserveOverhead(phase string, d time.Duration) {
	if m == nil {
		return
	}
	m.Overhead.WithLabelValues(phase).Observe(d.Seconds())
}

// Event counts one handled KV event.
func (m *Metrics) Event(kind, status string) {
	if m == nil {
		return
	}
	m.EventsApplied.WithLabelValues(kind, status).Inc()
}

// RaftIndexError counts one divergence of the exact index from the FSM.
func (m *Metrics) RaftIndexError() {
	if m == nil {
		return
	}
	m.RaftIndexErrors.Inc()
}
