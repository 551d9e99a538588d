package metrics

import "github.com/prometheus/client_golang/prometheus"

// BodySource is what the body metrics read at scrape time: an edge's
// budget of buffered request bodies (oaiedge.BodyBudget has this shape).
type BodySource interface {
	Held() int64
	Limit() int64
	Refused() int64
}

// NewBodies registers the buffered request body families of an edge (a
// router node's frontend or a relay's gateway) on reg, read from src at
// scrape time so that the request path pays nothing for them. A nil src
// reads zeros (for catalogues). Families already on reg are kept: one
// process has one edge, and a second edge on the same registry (tests)
// reports the first one's budget.
func NewBodies(reg prometheus.Registerer, src BodySource) {
	if src == nil {
		src = noBodies{}
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvrouter_edge_buffered_body_bytes",
			Help: "Request body bytes the process holds now, across its requests (bounded by --max-buffered-body-bytes)."},
			func() float64 { return float64(src.Held()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvrouter_edge_buffered_body_limit_bytes",
			Help: "The process's budget of buffered request body bytes (--max-buffered-body-bytes; 0: none)."},
			func() float64 { return float64(src.Limit()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvrouter_edge_body_budget_refusals_total",
			Help: "Requests refused with 503 before their body was read because the buffered body budget was full."},
			func() float64 { return float64(src.Refused()) }),
	} {
		register(reg, c)
	}
}

// noBodies is the source of a catalogue: no budget, nothing held.
type noBodies struct{}

func (noBodies) Held() int64    { return 0 }
func (noBodies) Limit() int64   { return 0 }
func (noBodies) Refused() int64 { return 0 }
