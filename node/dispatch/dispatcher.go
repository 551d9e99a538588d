package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// Dispatcher is the node's decision path: it implements Router over the
// engine registry and the routing decision path (policy.Decider), which
// owns the approximate and side indexes, the load trackers, the suspects
// and the session decisions. Build it with New. See the package
// documentation for the concurrency contract.
type Dispatcher struct {
	cfg     Config
	engines Engines
	core    *policy.Decider
	// pair is the disaggregated decision path (disagg.go), for models
	// whose ranks have roles; roles pools its scratch.
	pair     *policy.Disagg
	roles    sync.Pool
	bindings Bindings
	log      *slog.Logger
	obs      observers

	// mu guards workers, which change rarely (a new engine rank, an engine
	// leaving).
	mu      sync.RWMutex
	workers map[routing.Worker]*workerGauges

	lives   lives
	scratch sync.Pool
	// queues is the admission queue, nil when it is off; rt holds the
	// busy thresholds set at run time.
	queues *queues
	rt     runtimeThresholds
	// adv is the worker sets' advertised settings, nil when the engines
	// advertise none (advertised.go).
	adv *advertised
	// shared says once whether the shared-cache credit has a source
	// (route.go).
	shared sharedNotice
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
	d := &Dispatcher{cfg: cfg, engines: engines, log: log, obs: newObservers(m),
		workers: make(map[routing.Worker]*workerGauges), queues: newQueues(cfg, m)}
	d.adv = newAdvertised(engines, cfg.Seed, log)
	d.shared.idx = idx
	d.scratch.New = func() any { return new(policy.Scratch) }
	for _, o := range opts {
		o(d)
	}
	if err := d.buildBindings(); err != nil {
		return nil, err
	}
	var err error
	if d.core, err = policy.NewDecider(d.deciderConfig(), idx); err != nil {
		return nil, configError("%w", err)
	}
	if d.pair, err = policy.NewDisagg(d.deciderConfig(), idx); err != nil {
		return nil, configError("%w", err)
	}
	d.roles.New = func() any { return new(roleScratch) }
	return d, nil
}

// deciderConfig is the decision path's share of the configuration.
func (d *Dispatcher) deciderConfig() policy.DeciderConfig {
	c := d.cfg
	reports, _ := d.engines.(LoadReporter)
	return policy.DeciderConfig{
		Policy: c.Policy, Seed: c.Seed, Thresholds: c.Thresholds, BlockSize: c.BlockSize,
		Options:         policy.Options{KV: c.KV, TwoTier: c.TwoTier, DeviceAware: c.DeviceAware},
		ApproximateMode: c.ApproximateMode, ApproxTTL: c.ApproxTTL, ApproxPolicy: c.ApproxPolicy, PredictTTL: c.PredictTTL,
		MaxRequestAge: c.MaxRequestAge, ExpireInterval: c.ExpireInterval, SuspectTimeout: c.SuspectTimeout,
		Tracking: c.Tracking, Bindings: d.bindings, AffinityMode: c.AffinityMode, MaxSessions: c.MaxSessions,
		Reports: reports, Now: c.Now, Observer: decisionObserver{d}, Log: d.log,
	}
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
	b, err := policy.NewMemBindings(policy.MemConfig{TTL: d.cfg.AffinityTTL, MaxSessions: d.cfg.MaxSessions,
		OnExpire: func(n int) { d.obs.affinity(policy.AffinityExpire, n) }})
	if err != nil {
		return configError("%w", err)
	}
	d.bindings = b
	return nil
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
	d.obs.affinity(policy.AffinityUnbind, 1)
	d.obs.bindings(d.bindings)
	return nil
}

// RemoveEngine forgets an engine that left the fleet: the load booked on
// its ranks, its entries in the approximate and side indexes, its load
// gauges and every session binding to it. The exact index is the event
// plane's to clean. Requests still in flight on the engine free nothing
// more when they finish.
func (d *Dispatcher) RemoveEngine(id routing.WorkerID) {
	for _, r := range d.forgetRanks(id) {
		d.core.RemoveWorker(r.w)
		d.pair.RemoveWorker(r.w)
		d.obs.dropWorker(r.labels, r.inUse)
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
	d.obs.affinity(policy.AffinityInvalidate, n)
	d.obs.bindings(d.bindings)
}

// ErrSessionNotFound is returned by Session for a session with no live
// binding (or when affinity is off).
var ErrSessionNotFound = errors.New("dispatch: session not bound")

// SessionReader is the read side of the session store for operators and
// for other DCs' gateways: where is this session bound? The Dispatcher
// implements it; the answer is this node's applied state (a local read).
type SessionReader interface {
	Session(ctx context.Context, sessionID string) (Binding, error)
}

var _ SessionReader = (*Dispatcher)(nil)

// Session returns the live binding of a session, or ErrSessionNotFound.
func (d *Dispatcher) Session(ctx context.Context, sessionID string) (Binding, error) {
	if err := checkKey(sessionID); err != nil {
		return Binding{}, err
	}
	if d.bindings == nil {
		return Binding{}, fmt.Errorf("%w: session affinity is off", ErrSessionNotFound)
	}
	b, ok, err := d.bindings.Lookup(ctx, sessionID, d.cfg.Now())
	if err != nil {
		return Binding{}, storeError(err)
	}
	if !ok {
		return Binding{}, fmt.Errorf("%w: %q", ErrSessionNotFound, sessionID)
	}
	return b, nil
}
