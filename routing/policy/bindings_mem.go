package policy

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// sweepInterval rate-limits MemBindings' scan for expired bindings: one
// O(sessions) pass per second at most, about a millisecond at the default
// bound, instead of a deadline heap that every Acquire and Release would
// have to maintain.
const sweepInterval = time.Second

// MemConfig configures MemBindings.
type MemConfig struct {
	// TTL is the idle time after which an unheld binding expires.
	TTL time.Duration
	// MaxSessions bounds the bindings; Bind of a new key beyond it fails.
	MaxSessions int
	// OnExpire, if set, is called with the number of bindings a sweep or a
	// lookup found expired, for the affinity metrics. It runs under the
	// store's lock and must not call back into the store.
	OnExpire func(n int)
}

// MemBindings is the in-memory Bindings of one router (a single node or a
// simulation). Expired bindings are
// dropped lazily: a lookup of an expired key deletes it, and at most once
// per second an operation sweeps the whole table.
//
// Concurrency: safe for concurrent use; one mutex guards the table.
type MemBindings struct {
	cfg MemConfig

	mu        sync.Mutex
	m         map[string]routing.Binding
	version   uint64
	nextSweep time.Time
}

var _ Bindings = (*MemBindings)(nil)

// NewMemBindings returns an empty store, or an error wrapping
// ErrInvalidConfig.
func NewMemBindings(cfg MemConfig) (*MemBindings, error) {
	if cfg.TTL <= 0 {
		return nil, configError("affinity_ttl: must be > 0, got %v", cfg.TTL)
	}
	if cfg.MaxSessions <= 0 {
		return nil, configError("max_sessions: must be > 0, got %d", cfg.MaxSessions)
	}
	return &MemBindings{cfg: cfg, m: make(map[string]routing.Binding)}, nil
}

// live reports whether b has not expired at now.
func live(b routing.Binding, now time.Time) bool {
	return b.Active > 0 || now.Before(b.IdleDeadline)
}

// get returns key's live binding, deleting it if expired. Callers hold mu.
func (s *MemBindings) get(key string, now time.Time) (routing.Binding, bool) {
	s.sweep(now)
	b, ok := s.m[key]
	if ok && !live(b, now) {
		delete(s.m, key)
		s.expired(1)
		return routing.Binding{}, false
	}
	return b, ok
}

// sweep drops every expired binding, at most once per sweepInterval.
// Callers hold mu.
func (s *MemBindings) sweep(now time.Time) {
	if now.Before(s.nextSweep) {
		return
	}
	s.nextSweep = now.Add(sweepInterval)
	n := len(s.m)
	maps.DeleteFunc(s.m, func(_ string, b routing.Binding) bool { return !live(b, now) })
	s.expired(n - len(s.m))
}

// expired reports n expiries. Callers hold mu.
func (s *MemBindings) expired(n int) {
	if n > 0 && s.cfg.OnExpire != nil {
		s.cfg.OnExpire(n)
	}
}

// Lookup implements Bindings.
func (s *MemBindings) Lookup(_ context.Context, key string, now time.Time) (routing.Binding, bool, error) {
	if err := CheckSessionKey(key); err != nil {
		return routing.Binding{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.get(key, now)
	return b, ok, nil
}

// Acquire implements Bindings.
func (s *MemBindings) Acquire(_ context.Context, key string, version uint64, now time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.get(key, now)
	if !ok || b.Version != version {
		return false, nil
	}
	b.Active++
	s.m[key] = b
	return true, nil
}

// Release implements Bindings.
func (s *MemBindings) Release(_ context.Context, key string, version uint64, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[key]
	if !ok || b.Version != version || b.Active == 0 {
		return nil
	}
	b.Active--
	if b.Active == 0 {
		b.IdleDeadline = now.Add(s.cfg.TTL)
	}
	s.m[key] = b
	return nil
}

// Bind implements Bindings.
func (s *MemBindings) Bind(_ context.Context, key string, w routing.Worker, expect uint64, now time.Time) (routing.Binding, bool, error) {
	if err := CheckSessionKey(key); err != nil {
		return routing.Binding{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.get(key, now)
	if ok && cur.Version != expect || !ok && expect != 0 {
		return cur, false, nil
	}
	if !ok && len(s.m) >= s.cfg.MaxSessions {
		// A full table may hold expired bindings the rate-limited sweep
		// has not reached yet; a forced sweep is affordable here because
		// Route refuses new sessions while the table is full.
		s.nextSweep = time.Time{}
		s.sweep(now)
	}
	if !ok && len(s.m) >= s.cfg.MaxSessions {
		return routing.Binding{}, false, fmt.Errorf("%w: %d sessions bound", ErrSessionLimit, len(s.m))
	}
	s.version++
	b := routing.Binding{Worker: w, Version: s.version, Active: 1, IdleDeadline: now.Add(s.cfg.TTL)}
	s.m[key] = b
	return b, true, nil
}

// Invalidate implements Bindings.
func (s *MemBindings) Invalidate(_ context.Context, key string, version uint64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.m[key]; ok && b.Version == version {
		delete(s.m, key)
		return true, nil
	}
	return false, nil
}

// Unbind implements Bindings.
func (s *MemBindings) Unbind(_ context.Context, key string) error {
	if err := CheckSessionKey(key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

// InvalidateEngine implements Bindings.
func (s *MemBindings) InvalidateEngine(_ context.Context, id routing.WorkerID) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.m)
	maps.DeleteFunc(s.m, func(_ string, b routing.Binding) bool { return b.Worker.ID == id })
	return n - len(s.m), nil
}

// Len implements Bindings.
func (s *MemBindings) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
