package dispatch

import "context"

// Authoritative is implemented by a session store whose bindings are the
// cluster's, decided by compare-and-set through consensus. With such a
// store a new session is bound before its first request is dispatched,
// not after it succeeds: two nodes routing the session's first requests
// at once both propose, one wins, and the loser's request goes to the
// winner's engine instead of being served elsewhere. (A single node's
// in-memory store binds after success, so that a failed first request
// leaves nothing behind.)
type Authoritative interface {
	Authoritative() bool
}

// bindFirst binds a pending session to candidate i's worker before the
// request is booked, on an authoritative store. It returns the candidate
// the request must go to and whether that is by binding: the chosen one
// when this request won (it then holds the new binding), or the winner's
// when another request bound the session first. A winner that is not a
// live candidate here leaves the request on its own choice, unbound; its
// binding is invalidated by the session's next request, as affine does.
func (d *Dispatcher) bindFirst(ctx context.Context, sc *scratch, s *session, i int) (int, bool, error) {
	if !s.pending || !d.authoritative {
		return i, false, nil
	}
	s.pending = false
	w := sc.cands[i].Info.Worker
	b, won, err := d.bindings.Bind(ctx, s.key, w, s.expect, d.cfg.Now())
	if err != nil {
		return -1, false, storeError(err)
	}
	d.obs.bindings(d.bindings)
	if won {
		s.held = b.Version
		s.found, s.bound = false, Binding{}
		if s.expect != 0 {
			d.obs.affinity(evRebind, 1)
		} else {
			d.obs.affinity(evBind, 1)
		}
		return i, false, nil
	}
	d.obs.affinity(evConflict, 1)
	j := findCandidate(sc.cands, b.Worker)
	if j < 0 {
		return i, false, nil
	}
	s.found, s.bound = true, b
	return j, true, nil
}
