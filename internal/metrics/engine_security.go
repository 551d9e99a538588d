package metrics

import "github.com/prometheus/client_golang/prometheus"

// EngineSecurity is the metric family of the engines' trust boundary:
// what the event plane refused of the engines' own messages, and what the
// embedded NATS server refused of its clients. Every attack on the
// engines' side of a DC (impersonation, a flood of forged cards, a client
// without credentials) shows up here. Labels never carry a credential or
// a user name: only the message type and a reason.
type EngineSecurity struct {
	// EngineRefused counts engines' messages the event plane refused, by
	// message ("card", "heartbeat", "deregister", "kv") and reason:
	// "identity" (names another engine than its subject), "declared"
	// (claims a declared engine's id or endpoint), "capacity" (registry
	// full), "rate" (over the registration rate) and "overflow" (dropped
	// unread because the subscription's backlog was full).
	EngineRefused *prometheus.CounterVec
	// NATSViolations counts what the embedded NATS server refused, by kind:
	// "authentication" (no or wrong credentials), "publish" and
	// "subscribe" (a subject outside the client's permissions).
	NATSViolations *prometheus.CounterVec
}

// registerEngineSecurity builds the family and registers it with f.
func (m *Metrics) registerEngineSecurity(f func(prometheus.Collector)) {
	m.EngineRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_fleet_messages_refused_total",
		Help: "Engines' NATS messages refused by the event plane, by message and reason (identity, declared, capacity, rate, overflow)."},
		[]string{"message", "reason"})
	m.NATSViolations = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_nats_violations_total",
		Help: "Clients' operations the embedded NATS server refused, by kind (authentication, publish, subscribe)."},
		[]string{"kind"})
	f(m.EngineRefused)
	f(m.NATSViolations)
}

// EngineRefusal counts one refused engine message.
func (m *Metrics) EngineRefusal(message, reason string) {
	if m == nil {
		return
	}
	m.EngineRefused.WithLabelValues(message, reason).Inc()
}

// NATSViolation counts one violation the embedded NATS server reported.
func (m *Metrics) NATSViolation(kind string) {
	if m == nil {
		return
	}
	m.NATSViolations.WithLabelValues(kind).Inc()
}
