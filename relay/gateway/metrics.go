package gateway

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Decision labels of the requests metric. Every completion request is
// counted exactly once, by how it was finally served.
const (
	// DecisionLocal: routed and served in this DC.
	DecisionLocal = "local"
	// DecisionRemote: forwarded to another DC, which answered.
	DecisionRemote = "remote"
	// DecisionForwardedIn: forwarded here by another DC; served here.
	DecisionForwardedIn = "forwarded_in"
	// DecisionFallback: meant for another DC, which failed before the
	// first byte; served here instead.
	DecisionFallback = "fallback"
	// DecisionRejected: refused by the gateway (bad input, session's DC
	// unreachable).
	DecisionRejected = "rejected"
)

// Session placement labels.
const (
	placeLocalBinding  = "local_binding"
	placeRemoteBinding = "remote_binding"
	placeHomeLocal     = "home_local"
	placeHomeRemote    = "home_remote"
	placeTieBreak      = "tie_break"
)

// Metrics is the gateway's metric set on its own registry.
type Metrics struct {
	Registry *prometheus.Registry
	// labelled is Registry with the constant labels (Registerer).
	labelled prometheus.Registerer
	// Requests counts completion requests by decision.
	Requests *prometheus.CounterVec
	// ForwardDepth is the remote prefix depth of each request the policy
	// sent to another DC.
	ForwardDepth prometheus.Histogram
	// DecisionSeconds is the time from a parsed body to a chosen DC:
	// hashing, the local depth, the remote query, the policy and, for
	// sessions, the binding lookups.
	DecisionSeconds prometheus.Histogram
	// SessionPlacements counts how session requests found their DC.
	SessionPlacements *prometheus.CounterVec
	// NodeRetries counts requests sent to another router node after one
	// refused the connection.
	NodeRetries prometheus.Counter
	// SessionLookups counts, per remote DC considered by a
	// SummaryLocator, whether its session summary saved the WAN lookup
	// (skipped) or how the lookup it called for ended (confirmed,
	// false_positive, unsummarised, failed).
	SessionLookups *prometheus.CounterVec
}

// NewMetrics registers the gateway's metrics on a fresh registry, with
// constLabels (the relay's dc and name) on every series.
func NewMetrics(constLabels prometheus.Labels) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_gateway_requests_total",
			Help: "Completion requests by how they were served: local, remote, forwarded_in, fallback, rejected."}, []string{"decision"}),
		ForwardDepth: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kvrouter_gateway_forward_prefix_depth_blocks",
			Help: "Remote prefix depth in blocks of each request the prefix policy sent to another DC.", Buckets: prometheus.ExponentialBuckets(1, 2, 14)}),
		DecisionSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kvrouter_gateway_decision_duration_seconds",
			Help: "Time to choose the serving DC of a request.", Buckets: prometheus.ExponentialBuckets(1e-6, 2, 22)}),
		SessionPlacements: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_gateway_session_placements_total",
			Help: "Session requests by how their DC was found."}, []string{"how"}),
		NodeRetries: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvrouter_gateway_node_retries_total",
			Help: "Requests retried on another router node after a refused connection."}),
		SessionLookups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_gateway_session_lookups_total",
			Help: "Remote DCs considered for a session binding: skipped (the DC's fresh session summary says absent), " +
				"confirmed, false_positive (summary said present, the DC said not bound), unsummarised (no fresh summary), failed."},
			[]string{"outcome"}),
	}
	m.labelled = prometheus.WrapRegistererWith(constLabels, m.Registry)
	m.labelled.MustRegister(m.Requests, m.ForwardDepth, m.DecisionSeconds,
		m.SessionPlacements, m.NodeRetries, m.SessionLookups)
	for _, h := range []string{placeLocalBinding, placeRemoteBinding, placeHomeLocal, placeHomeRemote, placeTieBreak} {
		m.SessionPlacements.WithLabelValues(h)
	}
	for _, o := range []string{LookupSkipped, LookupConfirmed, LookupFalsePositive, LookupUnsummarised, LookupFailed} {
		m.SessionLookups.WithLabelValues(o)
	}
	for _, d := range []string{DecisionLocal, DecisionRemote, DecisionForwardedIn, DecisionFallback, DecisionRejected} {
		m.Requests.WithLabelValues(d)
	}
	return m
}

// Registerer registers more of the relay's metrics (its edge and link
// security counters) with the same constant labels.
func (m *Metrics) Registerer() prometheus.Registerer { return m.labelled }

// Handler serves the registry.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// decided records a request's final decision.
func (m *Metrics) decided(decision string) { m.Requests.WithLabelValues(decision).Inc() }

// decisionTook records the decision latency.
func (m *Metrics) decisionTook(d time.Duration) { m.DecisionSeconds.Observe(d.Seconds()) }
