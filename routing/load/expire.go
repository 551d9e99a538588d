package load

import "time"

// Expire frees every request older than MaxRequestAge at time now, and
// returns how many it freed. It is the safety net for a completion that never
// reached the router; such a request would otherwise be phantom load. The
// age counts from Add, not from the last progress. With MaxRequestAge zero it
// does nothing. Callers run it periodically (the reference sweeps every 60
// s); it scans every active request.
func (t *Tracker) Expire(now time.Time) int {
	if t.cfg.MaxRequestAge <= 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for id, a := range t.requests {
		if now.Sub(a.added) > t.cfg.MaxRequestAge && t.free(id) {
			n++
		}
	}
	t.expired += uint64(n)
	return n
}

// ExpiredTotal returns how many requests Expire has freed since New, for a
// counter metric: a rising value means completions are being lost.
func (t *Tracker) ExpiredTotal() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.expired
}
