package metrics

import "github.com/prometheus/client_golang/prometheus"

// Selection is the metric set of the node's selection edges: the
// selection API over gRPC and HTTP, and the gateway's endpoint picker
// (ext_proc). Their decisions are the dispatcher's, so the decision's own
// phases are in kvrouter_router_overhead_seconds; these count the calls
// and time each edge's whole answer (parsing and tokenizing included).
type Selection struct {
	// Requests counts calls by edge ("select_grpc", "select_http",
	// "ext_proc") and outcome ("ok", "client_error", "server_error",
	// "canceled", and for the picker "fell_through": answered without a
	// destination under fail-open, so the gateway's own balancing chose).
	Requests *prometheus.CounterVec
	// Decision is the time from a complete request (the picker: the end
	// of the body) to the edge's answer, by edge.
	Decision *prometheus.HistogramVec
	// Reservations is the number of outstanding reservations (load booked
	// through the selection API or the picker and not yet released);
	// Expired counts reservations freed at their deadline because their
	// caller never released them.
	Reservations prometheus.Gauge
	Expired      prometheus.Counter
}

// Selection edges and outcomes, the label values of Selection.Requests.
const (
	EdgeSelectGRPC = "select_grpc"
	EdgeSelectHTTP = "select_http"
	EdgeExtProc    = "ext_proc"

	OutcomeFellThrough = "fell_through"
)

// decisionBuckets span 10 µs to about 0.33 s: a decision on a large
// prompt takes tens of microseconds, and an edge's deadline is at most a
// few hundred milliseconds.
var decisionBuckets = prometheus.ExponentialBuckets(1e-5, 2, 16)

// NewSelection registers the selection edges' metrics on reg, reusing
// those already registered there, so that every edge shares one set.
func NewSelection(reg prometheus.Registerer) *Selection {
	s := &Selection{
		Requests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_selection_requests_total",
			Help: "Calls of the selection edges by edge (select_grpc, select_http, ext_proc) and outcome (ok, client_error, server_error, canceled, fell_through)."},
			[]string{"edge", "outcome"})),
		Decision: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kvrouter_selection_decision_seconds",
			Help: "Time from a complete request to a selection edge's answer (parsing and tokenizing included), by edge.", Buckets: decisionBuckets},
			[]string{"edge"})),
		Reservations: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "kvrouter_selection_reservations",
			Help: "Load reservations of the selection edges not yet released."})),
		Expired: register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "kvrouter_selection_reservations_expired_total",
			Help: "Reservations freed at their deadline because their caller never released them."})),
	}
	return s
}
