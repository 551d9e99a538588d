package dispatch

import (
	"context"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// Binding is a session's engine; see routing.Binding.
type Binding = routing.Binding

// Bindings is the session store: session key to engine, with idle expiry.
// Keys are session ids, or parent-session ids for a session group. The
// in-memory MemBindings serves a single node; a Raft-replicated store will
// implement the same contract for a DC.
//
// Every method takes now, the caller's clock, for deadlines; a replicated
// store may use its leader's time instead. A binding is live when it is
// held (Active > 0) or now is before its IdleDeadline; an expired binding
// behaves as absent everywhere.
//
// Concurrency: all methods are safe for concurrent use; each is atomic.
type Bindings interface {
	// Lookup returns the live binding of key, without holding it.
	Lookup(ctx context.Context, key string, now time.Time) (Binding, bool, error)
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
	Bind(ctx context.Context, key string, w routing.Worker, expect uint64, now time.Time) (Binding, bool, error)
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
