package metrics

import "github.com/prometheus/client_golang/prometheus"

// Security counts what the cluster's and the relay's links turned away,
// and the raft log's defences against an engine whose events cannot be
// replicated. Every refused attack of the security suite shows up here.
type Security struct {
	// Refusals counts refused connections and calls by link ("raft",
	// "cluster_api", "raft_forward", "cluster_join", "cluster_leave",
	// "relay_publish") and reason ("no_certificate",
	// "untrusted_certificate", "no_identity", "wrong_role", "wrong_dc",
	// "wrong_name", "not_member", "no_credential", "bad_credential").
	Refusals *prometheus.CounterVec
	// EventsRefused counts KV events kept out of the raft log by reason
	// ("too_large": no entry can carry the event).
	EventsRefused *prometheus.CounterVec
	// ResyncBackoffs counts resyncs of an engine rank refused because
	// the rank's previous resyncs made no progress.
	ResyncBackoffs prometheus.Counter
}

// Register registers the counters on r (a relay's gateway registry).
func (s *Security) Register(r prometheus.Registerer) {
	r.MustRegister(s.Refusals, s.EventsRefused, s.ResyncBackoffs)
}

// NewSecurity builds the security counters, registered on r when r is
// not nil.
func NewSecurity(r prometheus.Registerer) *Security {
	s := &Security{
		Refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_security_refusals_total",
			Help: "Connections and calls refused on the cluster and relay links, by link and reason."}, []string{"link", "reason"}),
		EventsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_raft_events_refused_total",
			Help: "KV events kept out of the raft log, by reason (too_large)."}, []string{"reason"}),
		ResyncBackoffs: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvrouter_raft_resync_backoffs_total",
			Help: "Resyncs of an engine rank refused because its previous resyncs made no progress."}),
	}
	if r != nil {
		s.Register(r)
	}
	return s
}

// Refused counts one refusal on link; a nil *Security counts nothing.
func (s *Security) Refused(link, reason string) {
	if s == nil {
		return
	}
	s.Refusals.WithLabelValues(link, reason).Inc()
}

// EventRefused counts one KV event kept out of the log.
func (s *Security) EventRefused(reason string) {
	if s == nil {
		return
	}
	s.EventsRefused.WithLabelValues(reason).Inc()
}

// ResyncBackoff counts one refused resync.
func (s *Security) ResyncBackoff() {
	if s == nil {
		return
	}
	s.ResyncBackoffs.Inc()
}

// Sec is m's security counters; nil for a nil *Metrics.
func (m *Metrics) Sec() *Security {
	if m == nil {
		return nil
	}
	return m.Security
}
