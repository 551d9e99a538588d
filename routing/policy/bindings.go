package policy

import (
	"context"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// MaxSessionKeyBytes bounds session keys, as the reference router bounds
// session ids: keys are stored per binding and replicated, so they are
// bounded.
const MaxSessionKeyBytes = 256

// Bindings is the session store: session key to engine, with idle expiry.
// Keys are session ids, or parent-session ids for a session group.
// MemBindings serves one router (a single node, a simulation); the DC's
// Raft-replicated store implements the same contract for a cluster. It is
// the one dependency of the Decider that may do I/O, which is why every
// method takes a context.
//
// Every method takes now, the caller's clock, for deadlines; a replicated
// store may use its leader's time instead. A binding is live when it is
// held (Active > 0) or now is before its IdleDeadline; an expired binding
// behaves as absent everywhere.
//
// Concurrency: all methods are safe for concurrent use; each is atomic.
type Bindings interface {
	// Lookup returns the live binding of key, without holding it.
	Lookup(ctx context.Context, key string, now time.Time) (routing.Binding, bool, error)
	// Acquire counts one more request holding the binding of key, if its
	// live version is version, and reports whether it did.
	Acquire(ctx context.Context, key string, version uint64, now time.Time) (bool, error)
	// Release ends one request's hold on the binding of key at version; the
	// idle deadline restarts (now + TTL) when the last holder leaves. A
	// version mismatch (the binding moved or was dropped) is a no-op.
	Release(ctx context.Context, key string, version uint64, now time.Time) error
	// Bind is compare-and-set: it binds key to w if the key's live version
	// is expect (0: no live binding), with a new version and the caller as
	// its one holder, and returns the new binding and true. Otherwise it
	// changes nothing and returns the live binding (the winner) and false:
	// the first writer wins. It returns ErrSessionLimit when a new key
	// would exceed the store's bound.
	Bind(ctx context.Context, key string, w routing.Worker, expect uint64, now time.Time) (routing.Binding, bool, error)
	// Invalidate drops the binding of key if its version is version, and
	// reports whether it did.
	Invalidate(ctx context.Context, key string, version uint64) (bool, error)
	// Unbind drops the binding of key whatever its version (explicit
	// unbind); an absent key is not an error.
	Unbind(ctx context.Context, key string) error
	// InvalidateEngine drops every binding to any rank of engine id and
	// returns how many it dropped.
	InvalidateEngine(ctx context.Context, id routing.WorkerID) (int, error)
	// Len returns the number of bindings, live or not yet swept.
	Len() int
}

// Authoritative is implemented by a session store whose bindings are the
// cluster's, decided by compare-and-set through consensus. With such a
// store a new session is bound before its first request is dispatched,
// not after it succeeds: two routers handling the session's first
// requests at once both propose, one wins, and the loser's request goes to
// the winner's engine instead of being served elsewhere. (A single
// router's in-memory store binds after success, so that a failed first
// request leaves nothing behind.)
type Authoritative interface {
	Authoritative() bool
}

// AffinityMode says how strictly a session sticks to its bound engine.
type AffinityMode uint8

const (
	// AffinityHard dispatches a bound session to its engine or, when that
	// engine is gone, invalidates the binding and selects afresh once.
	AffinityHard AffinityMode = iota
	// AffinitySoft follows the binding unless the bound engine is over a
	// busy threshold; then the pipeline selects and the binding moves.
	AffinitySoft
)

// String names the mode as configuration spells it.
func (m AffinityMode) String() string {
	switch m {
	case AffinityHard:
		return "hard"
	case AffinitySoft:
		return "soft"
	}
	return fmt.Sprintf("affinity_mode(%d)", uint8(m))
}

// MarshalText implements encoding.TextMarshaler.
func (m AffinityMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText parses "hard" or "soft", so that configuration loaders can
// fill the field from text.
func (m *AffinityMode) UnmarshalText(b []byte) error {
	switch string(b) {
	case "hard":
		*m = AffinityHard
	case "soft":
		*m = AffinitySoft
	default:
		return configError("affinity_mode: must be hard or soft, got %q", b)
	}
	return nil
}

// CheckSessionKey rejects an empty key (ErrInvalidRequest) and one over
// MaxSessionKeyBytes (ErrSessionLimit).
func CheckSessionKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty session id", ErrInvalidRequest)
	}
	if len(key) > MaxSessionKeyBytes {
		return fmt.Errorf("%w: session id of %d bytes over %d", ErrSessionLimit, len(key), MaxSessionKeyBytes)
	}
	return nil
}
