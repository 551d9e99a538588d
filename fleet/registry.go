package fleet

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// Errors returned by the registry.
var (
	// ErrUnknownEngine is returned for a heartbeat of an engine that is not
	// registered; the engine's next card registers it.
	ErrUnknownEngine = errors.New("fleet: unknown engine")
	// ErrStaleCard is returned for a heartbeat whose incarnation or card
	// checksum differs from the registered card; the engine's next card
	// replaces it.
	ErrStaleCard = errors.New("fleet: heartbeat does not match the registered card")
)

// Change says what a registration did.
type Change uint8

// Registration outcomes.
const (
	// Refreshed is a card identical to the registered one: only liveness.
	Refreshed Change = iota
	// Added is the first card of an engine.
	Added
	// Updated is a new card of the same incarnation and rank count (for
	// example a new endpoint): the event streams continue.
	Updated
	// Restarted is a new incarnation, or a new rank count, of a known
	// engine: its event ids start over and its cache is gone.
	Restarted
)

// String names the change for logs.
func (c Change) String() string {
	return [...]string{"refreshed", "added", "updated", "restarted"}[min(int(c), 3)]
}

// Engine is the registry's view of one engine. Values returned by the
// registry are copies the caller owns.
type Engine struct {
	ID          routing.WorkerID
	Model       string
	Endpoint    string
	Checksum    string
	Incarnation uint64
	// Workers is the routing view of each rank, indexed by rank.
	Workers []routing.WorkerInfo
	// Loads is the engine-reported load of each rank, indexed by rank;
	// zero until the first heartbeat carrying it.
	Loads []routing.Load
	// Registered is when the current card was first seen; LastSeen the
	// last card or accepted heartbeat.
	Registered time.Time
	LastSeen   time.Time
	// Source says who registered the engine: its own card or the
	// operator's declaration.
	Source Source
	// BootstrapPort is the card's bootstrap_port: a prefill engine's KV
	// bootstrap server (SGLang), 0 when it has none.
	BootstrapPort uint32
}

func (e *Engine) clone() Engine {
	c := *e
	c.Workers = slices.Clone(e.Workers)
	c.Loads = slices.Clone(e.Loads)
	return c
}

// Registry holds the live engines of one DC: their cards, liveness and
// reported loads. It is safe for concurrent use; listeners are called
// without the registry's lock held.
type Registry struct {
	liveness time.Duration
	m        *metrics.Metrics

	mu        sync.RWMutex
	engines   map[routing.WorkerID]*Engine
	listeners []func(Engine)
	silent    []func(Engine)
	// max, lim and the reservations are the admission rules of engines'
	// own cards (admission.go).
	max          int
	lim          *rate.Limiter
	reservedIDs  map[routing.WorkerID]bool
	reservedURLs map[string]bool
	sets         *WorkerSets // nil: no worker-set admission (workerset.go)
}

// NewRegistry returns an empty registry that expires engines silent for
// liveness. m may be nil.
func NewRegistry(liveness time.Duration, m *metrics.Metrics) *Registry {
	return &Registry{liveness: liveness, m: m, engines: make(map[routing.WorkerID]*Engine)}
}

// OnRemove registers f to be called with every engine that leaves the
// registry (expired or deregistered) and with the previous state of every
// engine that restarts, since its in-flight work and cache are gone too.
// The decision path uses it to drop load accounting and session bindings.
func (r *Registry) OnRemove(f func(Engine)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listeners = append(r.listeners, f)
}

// OnSilent registers f to be called with every engine that Sweep removes
// because it went silent, before the OnRemove listeners: its requests in
// flight will get no further answer, whereas an engine that deregisters
// has drained its own, and one that restarted has closed their
// connections.
func (r *Registry) OnSilent(f func(Engine)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.silent = append(r.silent, f)
}

// Register records an engine's own card seen at now (RegisterFrom with
// FromEngine).
func (r *Registry) Register(c *kvrpb.WorkerCard, now time.Time) (Change, error) {
	return r.RegisterFrom(c, now, FromEngine)
}

// RegisterFrom records a card from src seen at now. The card is
// validated and admitted (admission.go); a card that is invalid or not
// admitted changes nothing. A declared card replaces every engine's own
// card that claimed its id or endpoint, which the OnRemove listeners hear
// of as removed.
func (r *Registry) RegisterFrom(c *kvrpb.WorkerCard, now time.Time, src Source) (Change, error) {
	if c == nil {
		return Refreshed, fmt.Errorf("%w: nil card", wire.ErrMalformed)
	}
	if err := wire.ValidateCard(c); err != nil {
		return Refreshed, err
	}
	r.mu.Lock()
	var gone []Engine
	if src == FromDeclared {
		if e := r.engines[routing.WorkerID(c.EngineId)]; e == nil || e.Source != FromDeclared {
			gone = r.evictClaimantsLocked(c)
		}
	}
	old, known := r.engines[routing.WorkerID(c.EngineId)]
	change := classify(old, c)
	if err := r.admitLocked(old, c, change, src, now); err != nil {
		r.mu.Unlock()
		return change, err
	}
	switch change {
	case Refreshed:
		old.LastSeen = now
	case Updated:
		old.Model, old.Endpoint, old.Checksum, old.Workers = c.Model, c.EndpointUrl, c.Checksum, wire.Infos(c)
		old.BootstrapPort = c.BootstrapPort
		old.LastSeen = now
	default:
		if known {
			gone = append(gone, old.clone())
		}
		e := newEngine(c, now)
		e.Source = src
		r.engines[routing.WorkerID(c.EngineId)] = e
	}
	r.observeLocked(c)
	r.setGaugeLocked()
	r.mu.Unlock()
	r.notify(gone, false)
	return change, nil
}

// classify compares a card with the registered engine (nil when unknown).
func classify(old *Engine, c *kvrpb.WorkerCard) Change {
	switch {
	case old == nil:
		return Added
	case old.Incarnation != c.Incarnation || len(old.Workers) != int(c.DpSize):
		return Restarted
	case old.Checksum != c.Checksum || old.Endpoint != c.EndpointUrl:
		return Updated
	}
	return Refreshed
}

func newEngine(c *kvrpb.WorkerCard, now time.Time) *Engine {
	return &Engine{
		ID: routing.WorkerID(c.EngineId), Model: c.Model, Endpoint: c.EndpointUrl,
		Checksum: c.Checksum, Incarnation: c.Incarnation, Workers: wire.Infos(c),
		Loads: make([]routing.Load, c.DpSize), Registered: now, LastSeen: now, BootstrapPort: c.BootstrapPort,
	}
}

// Heartbeat records a heartbeat seen at now. It is accepted only for a
// registered engine whose incarnation and card checksum match; otherwise
// it is refused with ErrUnknownEngine or ErrStaleCard and does not count
// for liveness, since only a card can tell the registry what the engine
// now is. Loads of ranks the card does not have are ignored. An engine's
// own heartbeat (src FromEngine) never counts for a declared engine, whose
// liveness its probe decides.
func (r *Registry) Heartbeat(h *kvrpb.Heartbeat, now time.Time, src Source) error {
	if h == nil {
		return fmt.Errorf("%w: nil heartbeat", wire.ErrMalformed)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.engines[routing.WorkerID(h.EngineId)]
	switch {
	case src == FromEngine && r.declaredLocked(routing.WorkerID(h.EngineId), e):
		return fmt.Errorf("%w: heartbeat of engine %d", ErrDeclared, h.EngineId)
	case !ok:
		return fmt.Errorf("%w: %d", ErrUnknownEngine, h.EngineId)
	case e.Incarnation != h.Incarnation || e.Checksum != h.CardChecksum:
		return fmt.Errorf("%w: engine %d incarnation %d checksum %q", ErrStaleCard, h.EngineId, h.Incarnation, h.CardChecksum)
	}
	e.LastSeen = now
	for _, l := range h.Loads {
		if l != nil && int(l.Rank) < len(e.Loads) {
			e.Loads[l.Rank] = wire.Load(l)
		}
	}
	return nil
}

// Deregister removes the engine when incarnation matches its card (a late
// deregistration of an earlier incarnation must not remove the new one)
// and src may remove it (an engine's own deregistration never removes a
// declared engine), and reports the removed engine.
func (r *Registry) Deregister(id routing.WorkerID, incarnation uint64, src Source) (Engine, bool) {
	r.mu.Lock()
	e, ok := r.engines[id]
	if !ok || e.Incarnation != incarnation || src == FromEngine && r.declaredLocked(id, e) {
		r.mu.Unlock()
		return Engine{}, false
	}
	delete(r.engines, id)
	r.setGaugeLocked()
	r.mu.Unlock()
	gone := e.clone()
	r.notify([]Engine{gone}, false)
	return gone, true
}

// Sweep removes every engine not seen for the liveness timeout before now
// and returns them sorted by id.
//
// paused is how long this node itself was not running just before now (0
// normally; the sweeper measures it on the real clock): silence counts
// only while the node listens. A node that was stopped or starved
// (SIGSTOP, a VM pause, an overloaded machine) heard no heartbeat either,
// though the engines kept sending them, so Sweep first moves every
// engine's LastSeen forward by paused. A node resumed after a three-second
// pause used to drop every engine, and sessions bound to engines that had
// never stopped were moved when their next requests reached it before the
// queued heartbeats did.
func (r *Registry) Sweep(now time.Time, paused time.Duration) []Engine {
	r.mu.Lock()
	if paused > 0 {
		for _, e := range r.engines {
			e.LastSeen = e.LastSeen.Add(paused)
		}
	}
	var gone []Engine
	for id, e := range r.engines {
		if now.Sub(e.LastSeen) >= r.liveness {
			gone = append(gone, e.clone())
			delete(r.engines, id)
		}
	}
	r.setGaugeLocked()
	r.mu.Unlock()
	slices.SortFunc(gone, func(a, b Engine) int { return cmp.Compare(a.ID, b.ID) })
	r.notify(gone, true)
	return gone
}

// notify calls the listeners with every engine gone: the OnSilent ones
// first when the engines went silent, then the OnRemove ones.
func (r *Registry) notify(gone []Engine, silent bool) {
	if len(gone) == 0 {
		return
	}
	r.mu.RLock()
	var ls []func(Engine)
	if silent {
		ls = append(ls, r.silent...)
	}
	ls = append(ls, r.listeners...)
	r.mu.RUnlock()
	for _, e := range gone {
		for _, f := range ls {
			f(e)
		}
	}
}

// setGaugeLocked publishes the number of live ranks.
func (r *Registry) setGaugeLocked() {
	if r.m == nil {
		return
	}
	n := 0
	for _, e := range r.engines {
		n += len(e.Workers)
	}
	r.m.Workers.Set(float64(n))
}
