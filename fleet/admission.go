package fleet

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// Admission errors: a card the registry refuses changes nothing, and the
// plane counts it by the reason these name.
var (
	// ErrIdentity is returned for a message whose engine id differs from
	// the engine id of the subject it was published on. Where NATS
	// confines each engine's credentials to its own subjects, the subject
	// is the publisher's identity, so such a message is an engine speaking
	// for another.
	ErrIdentity = errors.New("fleet: message names another engine than its subject")
	// ErrDeclared is returned for an engine's own card (or heartbeat, or
	// deregistration) that claims the id or the endpoint URL of an engine
	// the operator declared: declarations are authoritative.
	ErrDeclared = errors.New("fleet: engine id or endpoint belongs to a declared engine")
	// ErrCapacity is returned for the card of a new engine while the
	// registry holds Config.MaxEngines engines.
	ErrCapacity = errors.New("fleet: engine registry is full")
	// ErrRateLimited is returned for a card that would add, restart or
	// update an engine beyond Config.RegistrationRate.
	ErrRateLimited = errors.New("fleet: engine registrations over the rate limit")
)

// Source says who vouches for a card or heartbeat.
type Source uint8

const (
	// FromEngine is an engine's own announcement over NATS: admitted within
	// the registry's limits, never over a declared engine.
	FromEngine Source = iota
	// FromDeclared is the operator's declaration (a static entry or DNS
	// discovery, probed by fleet/declared): always admitted, and it
	// replaces an engine's own card that claimed its id or endpoint.
	FromDeclared
)

// Limits bound what engines' own cards can do to a registry. Zero fields
// mean no bound (a bare registry, as in tests); the plane sets them from
// Config.
type Limits struct {
	// MaxEngines bounds the engines registered from their own cards and
	// declarations together; a new engine's card beyond it is refused.
	MaxEngines int
	// Rate and Burst bound the cards that add, restart or update an engine
	// (a token bucket). A card identical to the registered one only
	// refreshes liveness and is never limited.
	Rate  float64
	Burst int
}

// SetLimits installs the limits of engines' own cards.
func (r *Registry) SetLimits(l Limits) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.max = l.MaxEngines
	r.lim = nil
	if l.Rate > 0 {
		r.lim = rate.NewLimiter(rate.Limit(l.Rate), max(l.Burst, 1))
	}
}

// Reserve declares that id and url belong to an engine the operator
// declared (a static entry), before its probe registers it: an engine's
// own card can then never take either over, not even while the declared
// engine is down.
func (r *Registry) Reserve(id routing.WorkerID, url string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reservedIDs == nil {
		r.reservedIDs, r.reservedURLs = map[routing.WorkerID]bool{}, map[string]bool{}
	}
	r.reservedIDs[id], r.reservedURLs[url] = true, true
}

// admitLocked decides whether a card from src may make change. The caller
// holds r.mu.
func (r *Registry) admitLocked(old *Engine, c *kvrpb.WorkerCard, change Change, src Source, now time.Time) error {
	if src == FromDeclared {
		return nil
	}
	switch {
	case r.declaredLocked(routing.WorkerID(c.EngineId), old):
		return fmt.Errorf("%w: engine %d", ErrDeclared, c.EngineId)
	case change == Refreshed:
		return nil
	case r.declaredURLLocked(c.EndpointUrl):
		return fmt.Errorf("%w: engine %d claims a declared endpoint", ErrDeclared, c.EngineId)
	case change == Added && r.max > 0 && len(r.engines) >= r.max:
		return fmt.Errorf("%w: %d engines", ErrCapacity, len(r.engines))
	case r.lim != nil && !r.lim.AllowN(now, 1):
		return fmt.Errorf("%w: engine %d", ErrRateLimited, c.EngineId)
	}
	return nil
}

// declaredLocked reports whether id is reserved or registered by the
// operator's declaration.
func (r *Registry) declaredLocked(id routing.WorkerID, e *Engine) bool {
	return r.reservedIDs[id] || e != nil && e.Source == FromDeclared
}

// declaredURLLocked reports whether url is reserved or the endpoint of a
// declared engine. It scans the registry, which only cards that change
// something (rate-limited) get to.
func (r *Registry) declaredURLLocked(url string) bool {
	if r.reservedURLs[url] {
		return true
	}
	for _, e := range r.engines {
		if e.Source == FromDeclared && e.Endpoint == url {
			return true
		}
	}
	return false
}

// evictClaimantsLocked removes the engines registered from their own
// cards that claim a declared engine's id or endpoint, and returns them.
// The caller holds r.mu.
func (r *Registry) evictClaimantsLocked(c *kvrpb.WorkerCard) []Engine {
	var gone []Engine
	for id, e := range r.engines {
		if e.Source == FromEngine && (id == routing.WorkerID(c.EngineId) || e.Endpoint == c.EndpointUrl) {
			gone = append(gone, e.clone())
			delete(r.engines, id)
		}
	}
	return gone
}

// declared reports whether id is reserved or registered by declaration.
func (r *Registry) declared(id routing.WorkerID) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.declaredLocked(id, r.engines[id])
}
