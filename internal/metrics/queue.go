package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Queue is the admission queue's metric set, per model and policy class.
// It is registered apart from Metrics, by the dispatcher that runs a
// queue, so that nodes without one export no empty families.
type Queue struct {
	// PendingRequests, PendingISLTokens and PendingCachedTokens are what
	// waits in each class now.
	PendingRequests     *prometheus.GaugeVec
	PendingISLTokens    *prometheus.GaugeVec
	PendingCachedTokens *prometheus.GaugeVec
	// WaitSeconds is the time requests spent queued, by how they left:
	// "dispatched", "canceled" (the client left), "expired" (past the
	// class's max wait).
	WaitSeconds *prometheus.HistogramVec
	// Rejections counts requests refused by a class: the limit's key, or
	// "expired".
	Rejections *prometheus.CounterVec
	// ClassFallbacks counts requests that named an unknown policy class
	// and took the default family.
	ClassFallbacks *prometheus.CounterVec
}

// NewQueue registers the queue's families on r; a second call on the same
// registry returns collectors equal to the first's.
func NewQueue(r prometheus.Registerer) *Queue {
	cls := []string{"model", "policy_class"}
	q := &Queue{
		PendingRequests: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kvrouter_router_queue_pending_requests",
			Help: "Requests waiting in the admission queue, per policy class."}, cls),
		PendingISLTokens: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kvrouter_router_queue_pending_isl_tokens",
			Help: "Prompt tokens of the requests waiting in the admission queue."}, cls),
		PendingCachedTokens: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kvrouter_router_queue_pending_cached_tokens",
			Help: "Cached prompt tokens (best worker at enqueue) of the requests waiting in the admission queue."}, cls),
		WaitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kvrouter_router_queue_wait_seconds",
			Help: "Time requests spent in the admission queue, by outcome.", Buckets: latencyBuckets},
			append(cls, "outcome")),
		Rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_router_queue_rejections_total",
			Help: "Requests refused by the admission queue, by reason (a queue limit's key, or expired)."},
			append(cls, "reason")),
		ClassFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_router_queue_class_fallbacks_total",
			Help: "Requests refused with 400 for naming an unknown policy class or family."}, []string{"model"}),
	}
	q.PendingRequests = register(r, q.PendingRequests)
	q.PendingISLTokens = register(r, q.PendingISLTokens)
	q.PendingCachedTokens = register(r, q.PendingCachedTokens)
	q.WaitSeconds = register(r, q.WaitSeconds)
	q.Rejections = register(r, q.Rejections)
	q.ClassFallbacks = register(r, q.ClassFallbacks)
	return q
}

// register registers c, or returns the collector already registered under
// its name: an edge or a queue rebuilt on the same registry (a restart
// within one process) shares its collectors.
func register[C prometheus.Collector](r prometheus.Registerer, c C) C {
	err := r.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if prev, ok := are.ExistingCollector.(C); ok {
			return prev
		}
	}
	return c
}
