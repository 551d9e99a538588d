package dispatch

import (
	"context"
	"fmt"
	"sync"

	"github.com/kvrouter/kvrouter/routing"
)

// lives holds one context per engine with requests booked on it, which
// EngineSilent cancels. Each Decision carries its engine's context
// (Decision.Lost), so that ending every request of a silent engine costs
// one cancellation, and booking a request costs a read-locked map lookup
// rather than a registration per request.
type lives struct {
	mu sync.RWMutex
	m  map[routing.WorkerID]*life
}

// life is the context of one engine's requests and its cancellation.
type life struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// of returns engine id's current context, creating it on first use.
func (l *lives) of(id routing.WorkerID) context.Context {
	l.mu.RLock()
	e := l.m[id]
	l.mu.RUnlock()
	if e != nil {
		return e.ctx
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e = l.m[id]; e == nil {
		if l.m == nil {
			l.m = make(map[routing.WorkerID]*life)
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		e = &life{ctx: ctx, cancel: cancel}
		l.m[id] = e
	}
	return e.ctx
}

// end cancels engine id's context with cause (nil: forget it without
// cancelling); requests booked later get a new one.
func (l *lives) end(id routing.WorkerID, cause error) {
	l.mu.Lock()
	e := l.m[id]
	delete(l.m, id)
	l.mu.Unlock()
	if e != nil && cause != nil {
		e.cancel(cause)
	}
}

// EngineSilent ends the requests booked on engine id, which the registry
// dropped because it went silent (no heartbeat for the liveness timeout):
// a hung engine would otherwise hold them, mid-stream or waiting for its
// answer, until the client gave up. Each Decision.Lost of the engine is
// cancelled with a cause wrapping ErrEngineSilent. An engine that
// deregisters is not silent: it drains its requests first.
func (d *Dispatcher) EngineSilent(id routing.WorkerID) {
	d.lives.end(id, fmt.Errorf("%w: engine %d sent no heartbeat for the liveness timeout", ErrEngineSilent, id))
}
