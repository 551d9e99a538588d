package policy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// session is one request's view of its session binding.
type session struct {
	// key is the binding key; empty when the request has no session or
	// affinity is off.
	key string
	// bound is the binding the lookup found; found says there was one.
	bound routing.Binding
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

// lookupSession reads the request's binding. A new session is refused
// with ErrSessionLimit when the store is full, and otherwise marked to
// bind on success (unless the request ends the session).
func (d *Decider) lookupSession(ctx context.Context, q *Query, now time.Time) (session, error) {
	b := d.cfg.Bindings
	s := session{key: q.SessionKey, final: q.SessionFinal}
	if b == nil || s.key == "" {
		return session{}, nil
	}
	bound, ok, err := b.Lookup(ctx, s.key, now)
	if err != nil {
		return session{}, storeError(err)
	}
	s.bound, s.found = bound, ok
	if ok || s.final {
		return s, nil
	}
	if n := b.Len(); n >= d.cfg.MaxSessions {
		d.cfg.Observer.Affinity(AffinityLimit, 1)
		return session{}, fmt.Errorf("%w: %d sessions bound", ErrSessionLimit, n)
	}
	s.pending = true
	return s, nil
}

// affine applies a found binding and returns the bound candidate's index,
// or -1 when the pipeline must select:
//   - the bound worker is no longer a candidate (gone, or a suspect): the
//     binding is invalidated and the request selects afresh, once, and
//     binds the session on success (both modes);
//   - soft mode and the bound worker is over a busy threshold, or (either
//     mode) the bound worker is outside the request's allowed set: the
//     request selects normally and, on success, moves the binding to its
//     worker;
//   - otherwise the bound worker takes the request, without the busy
//     filter in hard mode (exact dispatch) and, in soft mode, because it
//     is not busy.
func (d *Decider) affine(ctx context.Context, sc *Scratch, q *Query, s *session) (int, bool) {
	i := findCandidate(sc.cands, s.bound.Worker)
	if i < 0 {
		if _, err := d.cfg.Bindings.Invalidate(ctx, s.key, s.bound.Version); err != nil {
			d.cfg.Log.Warn("invalidating a session binding", "session", s.key, "err", err)
		}
		d.cfg.Observer.Affinity(AffinityInvalidate, 1)
		s.found, s.pending, s.expect = false, !s.final, 0
		return -1, false
	}
	if !q.allows(s.bound.Worker.ID) || d.cfg.AffinityMode == AffinitySoft && sc.plan.th.Busy(&sc.cands[i]) {
		s.pending, s.expect = !s.final, s.bound.Version
		return -1, false
	}
	return i, true
}

// bindFirst binds a pending session to candidate i's worker before the
// request is booked, on an authoritative store. It returns the candidate
// the request must go to and whether that is by binding: the chosen one
// when this request won (it then holds the new binding), or the winner's
// when another request bound the session first. A winner that is not a
// candidate here, or not allowed, leaves the request on its own choice,
// unbound; a winner gone is invalidated by the session's next request,
// as affine does.
func (d *Decider) bindFirst(ctx context.Context, sc *Scratch, q *Query, s *session, i int) (int, bool, error) {
	if !s.pending || !d.authoritative {
		return i, false, nil
	}
	s.pending = false
	w := sc.cands[i].Info.Worker
	b, won, err := d.cfg.Bindings.Bind(ctx, s.key, w, s.expect, d.cfg.Now())
	if err != nil {
		return -1, false, storeError(err)
	}
	if won {
		s.held = b.Version
		s.found, s.bound = false, routing.Binding{}
		d.cfg.Observer.Affinity(bindEvent(s.expect), 1)
		return i, false, nil
	}
	d.cfg.Observer.Affinity(AffinityConflict, 1)
	j := findCandidate(sc.cands, b.Worker)
	if j < 0 || !q.allows(b.Worker.ID) {
		return i, false, nil
	}
	s.found, s.bound = true, b
	return j, true, nil
}

// bindEvent is the event of a won bind over version expect.
func bindEvent(expect uint64) AffinityEvent {
	if expect != 0 {
		return AffinityRebind
	}
	return AffinityBind
}

// holdSession makes a request that runs on its session's bound worker
// hold the binding, so that it does not expire while the request runs.
func (d *Decider) holdSession(ctx context.Context, s *session, w routing.Worker, bound bool, now time.Time) {
	if !s.found || s.bound.Worker != w {
		// A pinned request elsewhere leaves the binding alone (it is not
		// pending); a soft miss stays pending to move it.
		return
	}
	s.pending = false
	ok, err := d.cfg.Bindings.Acquire(ctx, s.key, s.bound.Version, now)
	if err != nil {
		d.cfg.Log.Warn("holding a session binding", "session", s.key, "err", err)
	}
	if ok {
		s.held = s.bound.Version
	}
	if bound {
		d.cfg.Observer.Affinity(AffinityHit, 1)
	}
}

// commitBinding binds the session to w after a successful dispatch, if the
// request was to: first writer wins, and a request that loses keeps its
// own engine for itself.
func (d *Decider) commitBinding(ctx context.Context, s *session, w routing.Worker) {
	if !s.pending {
		return
	}
	s.pending = false
	b, won, err := d.cfg.Bindings.Bind(ctx, s.key, w, s.expect, d.cfg.Now())
	switch {
	case errors.Is(err, ErrSessionLimit):
		d.cfg.Observer.Affinity(AffinityLimit, 1)
	case err != nil:
		d.cfg.Log.Warn("binding a session", "session", s.key, "worker", w.String(), "err", err)
	case !won:
		d.cfg.Observer.Affinity(AffinityConflict, 1)
	default:
		s.held = b.Version
		d.cfg.Observer.Affinity(bindEvent(s.expect), 1)
	}
}

// releaseSession ends the request's hold on its binding, which restarts
// the idle timer when it was the last, and unbinds a final session.
func (d *Decider) releaseSession(ctx context.Context, s *session) {
	if s.key == "" {
		return
	}
	if s.held != 0 {
		if err := d.cfg.Bindings.Release(ctx, s.key, s.held, d.cfg.Now()); err != nil {
			d.cfg.Log.Warn("releasing a session binding", "session", s.key, "err", err)
		}
		s.held = 0
	}
	if !s.final {
		return
	}
	if err := d.cfg.Bindings.Unbind(ctx, s.key); err != nil {
		d.cfg.Log.Warn("ending a session", "session", s.key, "err", err)
		return
	}
	d.cfg.Observer.Affinity(AffinityUnbind, 1)
}

// storeError classifies a session store failure: its own request and
// limit errors pass, anything else is ErrSessionStore.
func storeError(err error) error {
	if errors.Is(err, ErrInvalidRequest) || errors.Is(err, ErrSessionLimit) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrSessionStore, err)
}
