package metrics

import "github.com/prometheus/client_golang/prometheus"

// Edge is the access-control and certificate metric set of an HTTP edge
// (a router node's frontend or a relay's gateway), registered on the
// edge's own registry.
type Edge struct {
	// AuthRefusals counts requests refused by the edge's access control,
	// by scope ("api", "admin") and reason ("missing", "invalid",
	// "not_operator", "closed"). An unauthenticated attempt at an admin
	// route shows up here; the credential itself never does.
	AuthRefusals *prometheus.CounterVec
	// CertReloads counts reloads of the edge's TLS certificate after its
	// files changed, by outcome ("ok", "error"; on error the previous
	// certificate stays in use).
	CertReloads *prometheus.CounterVec
}

// NewEdge registers the edge metrics on reg (reusing those already
// registered there), with every label value
// present from the start so that alerts see zeros rather than nothing.
func NewEdge(reg prometheus.Registerer) *Edge {
	e := &Edge{
		AuthRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_edge_auth_refusals_total",
			Help: "Requests refused by the edge's access control, by scope (api, admin) and reason (missing, invalid, not_operator, closed)."},
			[]string{"scope", "reason"}),
		CertReloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_edge_cert_reloads_total",
			Help: "Reloads of the edge's TLS certificate after its files changed, by outcome (ok, error: the previous certificate stays)."},
			[]string{"outcome"}),
	}
	e.AuthRefusals = register(reg, e.AuthRefusals)
	e.CertReloads = register(reg, e.CertReloads)
	for _, scope := range []string{"api", "admin"} {
		for _, reason := range []string{"missing", "invalid", "not_operator", "closed"} {
			e.AuthRefusals.WithLabelValues(scope, reason)
		}
	}
	e.CertReloads.WithLabelValues("ok")
	e.CertReloads.WithLabelValues("error")
	return e
}

// Refused counts one refusal; it is the shape of oaiedge.Access.Refused
// with the scope as its label.
func (e *Edge) Refused(scope, reason string) {
	if e != nil {
		e.AuthRefusals.WithLabelValues(scope, reason).Inc()
	}
}

// Reloaded counts one certificate reload.
func (e *Edge) Reloaded(err error) {
	if e == nil {
		return
	}
	if err != nil {
		e.CertReloads.WithLabelValues("error").Inc()
		return
	}
	e.CertReloads.WithLabelValues("ok").Inc()
}
