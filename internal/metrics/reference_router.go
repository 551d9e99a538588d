package metrics

import "github.com/prometheus/client_golang/prometheus"

// Decisions are the decision path's counters that kvrouter's own families
// did not keep and the reference router's families need. Like Queue, they
// are registered by the dispatcher (Metrics.Decisions), with their
// reference names beside them.
type Decisions struct {
	// Routed counts requests the router chose an engine for, by model:
	// the reference's requests_started_total.
	Routed *prometheus.CounterVec
	// NonMaxOverlap counts decisions whose engine holds less of the
	// prompt than the best-cached candidate did (load or a session won
	// over the cache), by model.
	NonMaxOverlap *prometheus.CounterVec
	// Rejections counts overload refusals by model and reason:
	// all_workers_overloaded, pinned_worker_overloaded, or the admission
	// queue's reason (a queue limit's key, or expired).
	Rejections *prometheus.CounterVec
}

// Decisions registers the decision path's counters and their reference
// families on m's registry; a second call returns the first's counters.
func (m *Metrics) Decisions() *Decisions {
	d := &Decisions{
		Routed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_router_requests_routed_total",
			Help: "Requests the router chose an engine for, by model."}, []string{"model"}),
		NonMaxOverlap: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_router_non_max_overlap_selections_total",
			Help: "Decisions whose engine held less of the prompt than the best-cached candidate, by model."}, []string{"model"}),
		Rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_router_rejections_total",
			Help: "Overload refusals by model and reason (all_workers_overloaded, pinned_worker_overloaded, a queue limit's key, expired)."},
			[]string{"model", "reason"}),
	}
	d.Routed = register(m.Registerer(), d.Routed)
	d.NonMaxOverlap = register(m.Registerer(), d.NonMaxOverlap)
	d.Rejections = register(m.Registerer(), d.Rejections)
	// The reference families carry their own identity labels
	// (router_id, dynamo_namespace), not the set's constant ones.
	register(m.Registry, newReferenceSet(m, decisionMirrors(d)))
	return d
}

// QueueMetrics registers the admission queue's families (NewQueue) and
// their reference families on m's registry.
func (m *Metrics) QueueMetrics() *Queue {
	q := NewQueue(m.Registerer())
	register(m.Registry, newReferenceSet(m, queueMirrors(q)))
	return q
}

// decisionMirrors are the reference families read from d.
func decisionMirrors(d *Decisions) []mirror {
	return []mirror{
		{name: "dynamo_component_router_requests_started_total", help: "Requests the router chose a worker for.", typ: prometheus.CounterValue,
			src: func(*Metrics) prometheus.Collector { return d.Routed }, labels: []label{from("model", "model")}},
		{name: "dynamo_component_router_non_max_overlap_selections_total", help: "Selections of a worker other than the one with the most cached prompt blocks.",
			typ: prometheus.CounterValue, src: func(*Metrics) prometheus.Collector { return d.NonMaxOverlap },
			labels: []label{fixed("worker_type", WorkerTypeAggregated)}},
		{name: "dynamo_frontend_model_rejection_total", help: "Requests refused because every eligible worker was overloaded or the queue refused them.",
			typ: prometheus.CounterValue, src: func(*Metrics) prometheus.Collector { return d.Rejections }, labels: []label{from("model", "model")}},
	}
}

// queueMirrors are the reference's queue families read from q, with its
// labels model, dynamo_namespace, worker_type and policy_class.
func queueMirrors(q *Queue) []mirror {
	qm := func(name, help string, typ prometheus.ValueType, c prometheus.Collector, extra ...label) mirror {
		labels := append([]label{from("model", "model"), namespace, fixed("worker_type", WorkerTypeAggregated),
			from("policy_class", "policy_class")}, extra...)
		return mirror{name: name, help: help, typ: typ, src: func(*Metrics) prometheus.Collector { return c }, labels: labels}
	}
	return []mirror{
		qm("dynamo_frontend_router_queue_pending_requests", "Requests waiting in the router queue.", prometheus.GaugeValue, q.PendingRequests),
		qm("dynamo_frontend_router_queue_pending_isl_tokens", "Prompt tokens of the requests waiting in the router queue.", prometheus.GaugeValue, q.PendingISLTokens),
		qm("dynamo_frontend_router_queue_pending_cached_tokens", "Cached prompt tokens of the requests waiting in the router queue.", prometheus.GaugeValue, q.PendingCachedTokens),
		qm("dynamo_frontend_router_queue_backpressure_total", "Requests the router queue refused, by reason.", prometheus.CounterValue, q.Rejections,
			from("reason", "reason")),
	}
}

// referenceSet exports reference families read from collectors outside
// Metrics (the dispatcher's), under m's identity.
type referenceSet struct {
	m       *Metrics
	mirrors []mirror
	descs   []*prometheus.Desc
}

func newReferenceSet(m *Metrics, mirrors []mirror) *referenceSet {
	return &referenceSet{m: m, mirrors: mirrors, descs: describe(mirrors)}
}

// Describe implements prometheus.Collector.
func (c *referenceSet) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *referenceSet) Collect(ch chan<- prometheus.Metric) {
	collect(ch, c.m, c.m.reference.id.Load(), c.mirrors, c.descs)
}
