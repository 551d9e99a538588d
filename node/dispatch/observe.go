package dispatch

import (
	"strconv"
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
	hit                                  *hitRates
	unreachable                          prometheus.Counter
	decisions                            *decisionCounters
}

// hitRates caches the predicted hit rate histogram's child per model, so
// that each decision records without a label lookup.
type hitRates struct {
	vec    *prometheus.HistogramVec
	mu     sync.RWMutex
	models map[string]prometheus.Observer
}

// forModel returns model's child, resolving it on first use. Models come
// from the engine registry, so the map grows no more than the metric.
func (h *hitRates) forModel(model string) prometheus.Observer {
	h.mu.RLock()
	o := h.models[model]
	h.mu.RUnlock()
	if o != nil {
		return o
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if o = h.models[model]; o == nil {
		o = h.vec.WithLabelValues(model)
		h.models[model] = o
	}
	return o
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
	o.hit = &hitRates{vec: m.PredictedHitRate, models: make(map[string]prometheus.Observer)}
	o.unreachable = m.EngineUnreachable
	o.events = make(map[policy.AffinityEvent]prometheus.Counter, len(policy.AffinityEvents))
	for _, ev := range policy.AffinityEvents {
		o.events[ev] = m.AffinityEvents.WithLabelValues(string(ev))
	}
	return o
}

// engineUnreachable counts an engine a request could not reach.
func (o *observers) engineUnreachable() {
	if o.unreachable != nil {
		o.unreachable.Inc()
	}
}

// phases are the timestamps of one Route call.
type phases struct {
	start, hashed, matched, scheduled time.Time
}

// overhead records one decision's phase durations in milliseconds.
func (o *observers) overhead(p *phases) {
	if o.m == nil {
		return
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	o.hashing.Observe(ms(p.hashed.Sub(p.start)))
	o.matching.Observe(ms(p.matched.Sub(p.hashed)))
	o.scheduling.Observe(ms(p.scheduled.Sub(p.matched)))
	o.total.Observe(ms(p.scheduled.Sub(p.start)))
}

// hitRate records the chosen worker's predicted cached share.
func (o *observers) hitRate(model string, cached, blocks int) {
	if o.m == nil || blocks <= 0 {
		return
	}
	o.hit.forModel(model).Observe(float64(cached) / float64(blocks))
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

// labels renders a worker as its gauge labels.
func labels(w routing.Worker) (string, string) {
	return strconv.FormatUint(uint64(w.ID), 10), strconv.FormatUint(uint64(w.Rank), 10)
}

// dropWorker deletes a removed worker's gauges.
func (o *observers) dropWorker(w routing.Worker) {
	if o.m == nil {
		return
	}
	id, rank := labels(w)
	o.m.WorkerActivePrefillTokens.DeleteLabelValues(id, rank)
	o.m.WorkerActiveDecodeBlocks.DeleteLabelValues(id, rank)
}

// workerGauges are one rank's load gauges. mu orders the read of the
// tracker with the gauge write, so that the last update to run reads the
// newest load and the gauges never keep a stale value.
type workerGauges struct {
	mu              sync.Mutex
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

// gauges returns w's gauges, registering the rank on first use.
func (d *Dispatcher) gauges(w routing.Worker) *workerGauges {
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
	g = &workerGauges{}
	if m := d.obs.m; m != nil {
		id, rank := labels(w)
		g.prefill = m.WorkerActivePrefillTokens.WithLabelValues(id, rank)
		g.decode = m.WorkerActiveDecodeBlocks.WithLabelValues(id, rank)
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

// Unreachable implements policy.Observer.
func (o decisionObserver) Unreachable(routing.WorkerID) { o.d.obs.engineUnreachable() }
