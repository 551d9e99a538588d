package policy

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// suspects are the engines that a request could not reach, each left out
// of the candidates until a deadline. An engine killed without a goodbye
// stays registered until the liveness timeout drops it, and until then the
// kv policy keeps choosing it for the prefixes it had cached; without
// suspicion each of those requests would pay a failed connection before
// it is routed again. The deadline, rather than the next heartbeat, ends a
// suspicion: an engine that the registry still hears but the router cannot
// reach would otherwise be cleared and failed again every beat.
//
// has is on the request path: with no suspect (the normal state) it is
// one atomic load.
type suspects struct {
	n     atomic.Int32 // len(until), for the lock-free fast path
	mu    sync.Mutex
	until map[routing.WorkerID]time.Time
}

// add suspects engine id until the given time.
func (s *suspects) add(id routing.WorkerID, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.until == nil {
		s.until = make(map[routing.WorkerID]time.Time)
	}
	s.until[id] = until
	s.n.Store(int32(len(s.until)))
}

// has reports whether engine id is suspected at now, forgetting its
// suspicion once it has expired.
func (s *suspects) has(id routing.WorkerID, now time.Time) bool {
	if s.n.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	until, ok := s.until[id]
	if ok && !now.Before(until) {
		delete(s.until, id)
		s.n.Store(int32(len(s.until)))
		return false
	}
	return ok
}

// suspect leaves engine id out of the candidates for the suspect timeout.
func (d *Decider) suspect(id routing.WorkerID) {
	d.suspects.add(id, d.cfg.Now().Add(d.cfg.SuspectTimeout))
	d.cfg.Observer.Unreachable(id)
	d.cfg.Log.Warn("engine unreachable, left out of selection", "worker", id, "for", d.cfg.SuspectTimeout)
}
