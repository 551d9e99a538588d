package dispatch

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// observers holds the metric children the request path records into,
// resolved once so that Route does no label lookups for them. Every method
// is a no-op without metrics.
type observers struct {
	m                                    *metrics.Metrics
	hashing, matching, scheduling, total prometheus.Observer
	events                               map[policy.AffinityEvent]prometheus.Counter
	hit                                  *perModel[prometheus.Observer]
	unreachable                          prometheus.Counter
	decisions                            *decisionCounters
}

// perModel caches a metric's children per model, resolved on first use,
// so that a decision records without a label lookup. Models come from the
// engine registry, so the map grows no more than the metric.
type perModel[V any] struct {
	resolve func(model string) V
	mu      sync.RWMutex
	models  map[string]V
}

func newPerModel[V any](resolve func(model string) V) *perModel[V] {
	return &perModel[V]{resolve: resolve, models: make(map[string]V)}
}

// get returns model's children, resolving them on first use.
func (p *perModel[V]) get(model string) V {
	p.mu.RLock()
	v, ok := p.models[model]
	p.mu.RUnlock()
	if ok {
		return v
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if v, ok = p.models[model]; !ok {
		v = p.resolve(model)
		p.models[model] = v
	}
	return v
}

// newObservers resolves the children; m may be nil.
func newObservers(m *metrics.Metrics) observers {
	o := observers{m: m, decisions: newDecisionCounters(m)}
	if m == nil {
		return o
	}
	o.hashing = m.Overhead.WithLabelValues("hashing")
	o.matching = m.Overhead.WithLabelValues("matching")
	o.scheduling = m.Overhead.WithLabelValues("scheduling")
	o.total = m.Overhead.WithLabelValues("total")
	o.hit = newPerModel(func(model string) prometheus.Observer { return m.PredictedHitRate.WithLabelValues(model) })
	o.unreachable = m.EngineUnreachable
	o.events = make(map[policy.AffinityEvent]prometheus.Counter, len(policy.AffinityEvents))
	for _, ev := range policy.AffinityEvents {
		o.events[ev] = m.AffinityEvents.WithLabelValues(string(ev))
	}
	return o
}

// phases are the timestamps of one Route call.
type phases struct {
	start, hashed, matched, scheduled time.Time
}

// overhead records one decision's phase durations in seconds.
func (o *observers) overhead(p *phases) {
	if o.m == nil {
		return
	}
	o.hashing.Observe(p.hashed.Sub(p.start).Seconds())
	o.matching.Observe(p.matched.Sub(p.hashed).Seconds())
	o.scheduling.Observe(p.scheduled.Sub(p.matched).Seconds())
	o.total.Observe(p.scheduled.Sub(p.start).Seconds())
}

// hitRate records the chosen worker's predicted cached share.
func (o *observers) hitRate(model string, cached, blocks int) {
	if o.m == nil || blocks <= 0 {
		return
	}
	o.hit.get(model).Observe(float64(cached) / float64(blocks))
}

// affinity counts n affinity events.
func (o *observers) affinity(ev policy.AffinityEvent, n int) {
	if o.m == nil || n <= 0 {
		return
	}
	o.events[ev].Add(float64(n))
}

// bindings sets the bindings gauge from the store.
func (o *observers) bindings(b Bindings) {
	if o.m == nil || b == nil {
		return
	}
	o.m.SessionBindings.Set(float64(b.Len()))
}

// labels renders a worker of model as its gauge labels: the engine's
// endpoint URL (what the operator configured or the engine announced,
// stable across restarts of the engine and of the router, unlike the
// engine id an engine may draw at random when it starts), the rank and
// the engine's role. An engine whose endpoint is unknown is named by its
// id.
func (d *Dispatcher) labels(w routing.Worker, model string) workerLabels {
	name, ok := d.engines.Endpoint(w.ID)
	if name = strings.TrimSuffix(name, "/"); !ok || name == "" {
		name = strconv.FormatUint(uint64(w.ID), 10)
	}
	return workerLabels{name: name, rank: strconv.FormatUint(uint64(w.Rank), 10), role: d.roleOf(w, model).String()}
}

// roleOf is w's role as the registry lists it (aggregated when it no
// longer does). It reads the model's ranks, so it is for a rank's first
// booking only, when its gauges are made; an engine keeps the role it
// first booked with until it leaves.
func (d *Dispatcher) roleOf(w routing.Worker, model string) routing.Role {
	ranks, _ := d.engines.Workers(model)
	for i := range ranks {
		if ranks[i].Worker == w {
			return ranks[i].Role
		}
	}
	return routing.RoleAggregated
}

// workerLabels are a rank's worker, rank and role label values.
type workerLabels struct{ name, rank, role string }

// values are the labels in the gauges' order.
func (l *workerLabels) values() []string { return []string{l.name, l.rank, l.role} }

// dropWorker deletes a removed worker's gauges, unless inUse says that
// another live rank has the same labels (an engine that restarted on the
// same endpoint with a new id before the old one was removed).
func (o *observers) dropWorker(l workerLabels, inUse bool) {
	if o.m == nil || inUse {
		return
	}
	o.m.WorkerActivePrefillTokens.DeleteLabelValues(l.values()...)
	o.m.WorkerActiveDecodeBlocks.DeleteLabelValues(l.values()...)
}

// workerGauges are one rank's load gauges. mu orders the read of the
// tracker with the gauge write, so that the last update to run reads the
// newest load and the gauges never keep a stale value.
type workerGauges struct {
	mu              sync.Mutex
	labels          workerLabels
	prefill, decode prometheus.Gauge
}

// set publishes the booked worker's current load.
func (g *workerGauges) set(b *policy.Booking) {
	if g.prefill == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	l := b.Active()
	g.prefill.Set(float64(l.PrefillTokens))
	g.decode.Set(float64(l.DecodeBlocks))
}

// gauges returns the gauges of w, a rank of model, registering the rank
// on first use.
func (d *Dispatcher) gauges(w routing.Worker, model string) *workerGauges {
	d.mu.RLock()
	g := d.workers[w]
	d.mu.RUnlock()
	if g != nil {
		return g
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if g = d.workers[w]; g != nil {
		return g
	}
	g = &workerGauges{labels: d.labels(w, model)}
	if m := d.obs.m; m != nil {
		g.prefill = m.WorkerActivePrefillTokens.WithLabelValues(g.labels.values()...)
		g.decode = m.WorkerActiveDecodeBlocks.WithLabelValues(g.labels.values()...)
	}
	d.workers[w] = g
	return g
}

// publishLoad updates the booked worker's gauges unless the rank was
// removed meanwhile.
func (d *Dispatcher) publishLoad(b *policy.Booking) {
	d.mu.RLock()
	g := d.workers[b.Worker()]
	d.mu.RUnlock()
	if g != nil {
		g.set(b)
	}
}

// decisionObserver counts the decision path's events in the node's
// metrics.
type decisionObserver struct{ d *Dispatcher }

// Affinity implements policy.Observer: the event counter and, for events
// that change the store, the bindings gauge.
func (o decisionObserver) Affinity(ev policy.AffinityEvent, n int) {
	o.d.obs.affinity(ev, n)
	if ev != policy.AffinityHit && ev != policy.AffinityLimit {
		o.d.obs.bindings(o.d.bindings)
	}
}

// Unreachable implements policy.Observer: it counts an engine a request
// could not reach.
func (o decisionObserver) Unreachable(routing.WorkerID) {
	if u := o.d.obs.unreachable; u != nil {
		u.Inc()
	}
}

// forgottenRank is a removed rank and its gauges' labels; inUse says that
// another live rank has the same labels.
type forgottenRank struct {
	w      routing.Worker
	labels workerLabels
	inUse  bool
}

// forgetRanks removes engine id's ranks from the gauge table.
func (d *Dispatcher) forgetRanks(id routing.WorkerID) []forgottenRank {
	d.mu.Lock()
	defer d.mu.Unlock()
	var gone []forgottenRank
	for w, g := range d.workers {
		if w.ID == id {
			gone = append(gone, forgottenRank{w: w, labels: g.labels})
			delete(d.workers, w)
		}
	}
	for i := range gone {
		for _, g := range d.workers {
			gone[i].inUse = gone[i].inUse || g.labels == gone[i].labels
		}
	}
	return gone
}
