package dispatch

import (
	"context"
	"errors"
	"fmt"
)

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
