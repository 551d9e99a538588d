package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// session is one request's view of its session binding.
type session struct {
	// key is the binding key (the parent session id for a group member);
	// empty when the request has no session or affinity is off.
	key string
	// bound is the binding Route found; found says there was one.
	bound Binding
	found bool
	// held is the version of the binding this request holds (0: none).
	held uint64
	// pending makes the request bind the session when it succeeds, over
	// the binding at version expect (0: over no binding).
	pending bool
	expect  uint64
	// final ends the session when the request ends.
	final bool
}

// sessionKey is the binding key of a request: a session group shares its
// parent's binding.
func sessionKey(r *Request) string {
	if r.ParentSessionID != "" {
		return r.ParentSessionID
	}
	return r.SessionID
}

// lookupSession reads the request's binding. A new session is refused
// with ErrSessionLimit when the store is full, and otherwise marked to
// bind on success (unless the request ends the session).
func (d *Dispatcher) lookupSession(ctx context.Context, r *Request, now time.Time) (session, error) {
	s := session{key: sessionKey(r), final: r.SessionFinal}
	if d.bindings == nil || s.key == "" {
		return session{}, nil
	}
	b, ok, err := d.bindings.Lookup(ctx, s.key, now)
	if err != nil {
		return session{}, storeError(err)
	}
	s.bound, s.found = b, ok
	if ok || s.final {
		return s, nil
	}
	if n := d.bindings.Len(); n >= d.cfg.MaxSessions {
		d.obs.affinity(evLimit, 1)
		return session{}, fmt.Errorf("%w: %d sessions bound", ErrSessionLimit, n)
	}
	s.pending = true
	return s, nil
}

// affine applies a found binding and returns the bound candidate's index,
// or -1 when the pipeline must select:
//   - the bound worker is no longer a live candidate: the binding is
//     invalidated and the request selects afresh, once, and binds the
//     session on success (both modes);
//   - soft mode and the bound worker is over a busy threshold: the request
//     selects normally and, on success, moves the binding to its worker;
//   - otherwise the bound worker takes the request, without the busy
//     filter in hard mode (exact dispatch) and, in soft mode, because it
//     is not busy.
func (d *Dispatcher) affine(ctx context.Context, sc *scratch, s *session) (int, bool) {
	i := findCandidate(sc.cands, s.bound.Worker)
	if i < 0 {
		if _, err := d.bindings.Invalidate(ctx, s.key, s.bound.Version); err != nil {
			d.log.Warn("invalidating a session binding", "session", s.key, "err", err)
		}
		d.obs.affinity(evInvalidate, 1)
		d.obs.bindings(d.bindings)
		s.found, s.pending, s.expect = false, !s.final, 0
		return -1, false
	}
	if d.cfg.AffinityMode == AffinitySoft && d.cfg.Thresholds.Busy(&sc.cands[i]) {
		s.pending, s.expect = !s.final, s.bound.Version
		return -1, false
	}
	return i, true
}

// holdSession makes a request that runs on its session's bound worker
// hold the binding, so that it does not expire while the request runs.
func (d *Dispatcher) holdSession(ctx context.Context, s *session, w routing.Worker, bound bool, p *plan) {
	if !s.found || s.bound.Worker != w {
		// A pinned request elsewhere leaves the binding alone (it is not
		// pending); a soft miss stays pending to move it.
		return
	}
	s.pending = false
	ok, err := d.bindings.Acquire(ctx, s.key, s.bound.Version, p.now)
	if err != nil {
		d.log.Warn("holding a session binding", "session", s.key, "err", err)
	}
	if ok {
		s.held = s.bound.Version
	}
	if bound {
		d.obs.affinity(evHit, 1)
	}
}

// commitBinding binds the session to w after a successful dispatch, if the
// request was to: first writer wins, and a request that loses keeps its
// own engine for itself.
func (d *Dispatcher) commitBinding(ctx context.Context, s *session, w routing.Worker) {
	if !s.pending {
		return
	}
	s.pending = false
	b, won, err := d.bindings.Bind(ctx, s.key, w, s.expect, d.cfg.Now())
	switch {
	case errors.Is(err, ErrSessionLimit):
		d.obs.affinity(evLimit, 1)
	case err != nil:
		d.log.Warn("binding a session", "session", s.key, "worker", w.String(), "err", err)
	case !won:
		d.obs.affinity(evConflict, 1)
	case s.expect != 0:
		s.held = b.Version
		d.obs.affinity(evRebind, 1)
	default:
		s.held = b.Version
		d.obs.affinity(evBind, 1)
	}
	d.obs.bindings(d.bindings)
}

// releaseSession ends the request's hold on its binding, which restarts
// the idle timer when it was the last, and unbinds a final session.
func (d *Dispatcher) releaseSession(ctx context.Context, s *session) {
	if s.key == "" {
		return
	}
	if s.held != 0 {
		if err := d.bindings.Release(ctx, s.key, s.held, d.cfg.Now()); err != nil {
			d.log.Warn("releasing a session binding", "session", s.key, "err", err)
		}
		s.held = 0
	}
	if !s.final {
		return
	}
	if err := d.bindings.Unbind(ctx, s.key); err != nil {
		d.log.Warn("ending a session", "session", s.key, "err", err)
		return
	}
	d.obs.affinity(evUnbind, 1)
	d.obs.bindings(d.bindings)
}
