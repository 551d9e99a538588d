package dispatch

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/load"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// randStream is the PCG stream of the selectors' generator ("dispatch"),
// so that Config.Seed alone fixes the sequence.
const randStream = 0x6469737061746368

// Dispatcher is the node's decision path: it implements Router over the
// engine registry, the exact index, its own approximate and side indexes,
// the load trackers, the policy pipeline and the session store. Build it
// with New. See the package documentation for the concurrency contract.
type Dispatcher struct {
	cfg      Config
	engines  Engines
	reports  LoadReporter
	idx      *index.Exact
	approx   *index.Approx
	side     *index.Approx
	pipe     *policy.Pipeline
	bindings Bindings
	log      *slog.Logger
	obs      observers

	// mu guards trackers and workers, which change rarely (a new block
	// size, a new engine rank, an engine leaving).
	mu       sync.RWMutex
	trackers map[int]*load.Tracker
	workers  map[routing.Worker]*workerGauges

	// authoritative: bindings is an Authoritative store (bind first).
	authoritative bool

	suspects   suspects
	lives      lives
	lastExpire atomic.Int64
	scratch    sync.Pool
}

var _ Router = (*Dispatcher)(nil)

// Option adjusts New.
type Option func(*Dispatcher)

// WithBindings replaces the in-memory session store, e.g. by a replicated
// one. It has no effect while affinity is off (AffinityTTL 0).
func WithBindings(b Bindings) Option {
	return func(d *Dispatcher) { d.bindings = b }
}

// New validates cfg (after EnsureDefaults) and builds a dispatcher. idx is
// the event-fed exact index, shared with the event plane, which alone
// writes it; it may be nil only in approximate mode. m and log may be nil.
func New(cfg Config, engines Engines, idx *index.Exact, m *metrics.Metrics, log *slog.Logger, opts ...Option) (*Dispatcher, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if engines == nil || (idx == nil && !cfg.ApproximateMode) {
		return nil, configError("New: engines and, unless approximate_mode, an exact index are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Dispatcher{cfg: cfg, engines: engines, idx: idx, log: log, obs: newObservers(m),
		trackers: make(map[int]*load.Tracker), workers: make(map[routing.Worker]*workerGauges)}
	d.reports, _ = engines.(LoadReporter)
	d.scratch.New = func() any { return new(scratch) }
	if err := d.buildIndexes(); err != nil {
		return nil, err
	}
	if err := d.buildPipeline(); err != nil {
		return nil, err
	}
	for _, o := range opts {
		o(d)
	}
	if a, ok := d.bindings.(Authoritative); ok {
		d.authoritative = a.Authoritative()
	}
	return d, d.buildBindings()
}

// buildIndexes makes the approximate index and, with PredictTTL, the side
// index.
func (d *Dispatcher) buildIndexes() error {
	var err error
	if d.approx, err = index.NewApprox(index.ApproxConfig{TTL: d.cfg.ApproxTTL}); err != nil {
		return configError("approx_ttl: %w", err)
	}
	if d.cfg.PredictTTL > 0 {
		if d.side, err = index.NewSide(index.ApproxConfig{TTL: d.cfg.PredictTTL}); err != nil {
			return configError("predict_ttl: %w", err)
		}
	}
	return nil
}

// buildPipeline makes the selector and the standard filter pipeline.
func (d *Dispatcher) buildPipeline() error {
	opts := policy.Options{KV: d.cfg.KV, TwoTier: d.cfg.TwoTier, DeviceAware: d.cfg.DeviceAware,
		Rand: rand.New(rand.NewPCG(d.cfg.Seed, randStream))}
	sel, err := policy.New(d.cfg.Policy, opts)
	if err != nil {
		return configError("policy: %w", err)
	}
	d.pipe, err = policy.NewPipeline(d.cfg.Thresholds, sel)
	if err != nil {
		return configError("busy: %w", err)
	}
	return nil
}

// buildBindings makes the in-memory session store when affinity is on and
// no store was given, and drops any store when it is off.
func (d *Dispatcher) buildBindings() error {
	if d.cfg.AffinityTTL == 0 {
		d.bindings = nil
		return nil
	}
	if d.bindings != nil {
		return nil
	}
	b, err := NewMemBindings(MemConfig{TTL: d.cfg.AffinityTTL, MaxSessions: d.cfg.MaxSessions,
		OnExpire: func(n int) { d.obs.affinity(evExpire, n) }})
	d.bindings = b
	return err
}

// Models implements Router: the models served by live engines.
func (d *Dispatcher) Models() []Model { return d.engines.Models() }

// Unbind implements Router: it ends a session's (or session group's)
// binding. With affinity off it does nothing.
func (d *Dispatcher) Unbind(ctx context.Context, sessionID string) error {
	if d.bindings == nil {
		return nil
	}
	if err := checkKey(sessionID); err != nil {
		return err
	}
	if err := d.bindings.Unbind(ctx, sessionID); err != nil {
		return storeError(err)
	}
	d.obs.affinity(evUnbind, 1)
	d.obs.bindings(d.bindings)
	return nil
}

// RemoveEngine forgets an engine that left the fleet: the load booked on
// its ranks, its entries in the dispatcher's approximate and side indexes,
// its load gauges and every session binding to it. The exact index is the
// event plane's to clean. Requests still in flight on the engine free
// nothing more when they finish.
func (d *Dispatcher) RemoveEngine(id routing.WorkerID) {
	d.mu.Lock()
	var gone []routing.Worker
	for w := range d.workers {
		if w.ID == id {
			gone = append(gone, w)
			delete(d.workers, w)
		}
	}
	trackers := make([]*load.Tracker, 0, len(d.trackers))
	for _, t := range d.trackers {
		trackers = append(trackers, t)
	}
	d.mu.Unlock()
	for _, w := range gone {
		for _, t := range trackers {
			t.RemoveWorker(w)
		}
		d.approx.RemoveWorker(w)
		if d.side != nil {
			d.side.RemoveWorker(w)
		}
		d.obs.dropWorker(w)
	}
	d.lives.end(id, nil)
	d.invalidateEngine(id)
}

// invalidateEngine drops the engine's session bindings.
func (d *Dispatcher) invalidateEngine(id routing.WorkerID) {
	if d.bindings == nil {
		return
	}
	n, err := d.bindings.InvalidateEngine(context.Background(), id)
	if err != nil {
		d.log.Warn("invalidating session bindings", "worker", id, "err", err)
		return
	}
	d.obs.affinity(evInvalidate, n)
	d.obs.bindings(d.bindings)
}

// tracker returns the load tracker of a block size, creating it: engines
// of different block sizes cannot share one, since the tracker counts
// blocks.
func (d *Dispatcher) tracker(blockSize int) (*load.Tracker, error) {
	d.mu.RLock()
	t := d.trackers[blockSize]
	d.mu.RUnlock()
	if t != nil {
		return t, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if t = d.trackers[blockSize]; t != nil {
		return t, nil
	}
	c := load.DefaultConfig(blockSize)
	c.MaxRequestAge = d.cfg.MaxRequestAge
	t, err := load.New(c)
	if err != nil {
		return nil, err
	}
	d.trackers[blockSize] = t
	return t, nil
}

// maybeExpire frees requests whose completion never arrived and prunes the
// approximate indexes, at most once per ExpireInterval of the injected
// clock; the caller that wins the compare-and-swap does the sweep, so no
// goroutine is needed.
func (d *Dispatcher) maybeExpire(now time.Time) {
	last := d.lastExpire.Load()
	if last != 0 && now.UnixNano()-last < int64(d.cfg.ExpireInterval) {
		return
	}
	if !d.lastExpire.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	d.mu.RLock()
	trackers := make([]*load.Tracker, 0, len(d.trackers))
	for _, t := range d.trackers {
		trackers = append(trackers, t)
	}
	d.mu.RUnlock()
	for _, t := range trackers {
		if n := t.Expire(now); n > 0 {
			d.log.Warn("freed requests whose completion never arrived", "count", n)
		}
	}
	d.approx.Prune(now)
	if d.side != nil {
		d.side.Prune(now)
	}
}
