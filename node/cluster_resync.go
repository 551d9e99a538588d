package node

import (
	"errors"
	"time"
)

// errResyncBackoff is returned for a resync refused because the rank's
// previous resync did not cure its stream.
var errResyncBackoff = errors.New("resync backing off: the rank's last resync made no progress")

// Resync backoff bounds. A rank whose stream breaks again right after a
// resync (an engine emitting events no raft entry can carry) would
// otherwise write its whole snapshot into the log at every event.
const (
	minResyncBackoff = time.Second
	maxResyncBackoff = 5 * time.Minute
)

// resyncGate decides whether a rank may resync now. A resync "made no
// progress" when the rank's stream was refused again (an event too large
// for any entry) before the next resync: each such resync doubles the
// wait before the next one, from minResyncBackoff to maxResyncBackoff,
// and a resync after a clean stretch resets it.
type resyncGate struct {
	last     time.Time
	backoff  time.Duration
	resynced bool // a resync happened since the stream was last refused
	poisoned bool // an event was refused since the last resync
	reported bool // the current backoff was logged
}

// refused records an event of the rank kept out of the log.
func (g *resyncGate) refused() { g.poisoned = true }

// admit reports whether a resync may run at now, and otherwise how long
// it has to wait.
func (g *resyncGate) admit(now time.Time) (bool, time.Duration) {
	switch {
	case g.poisoned && g.resynced:
		g.backoff = min(max(2*g.backoff, minResyncBackoff), maxResyncBackoff)
		g.resynced = false
	case !g.poisoned:
		g.backoff, g.reported = 0, false
	}
	if wait := g.last.Add(g.backoff).Sub(now); wait > 0 {
		return false, wait
	}
	return true, 0
}

// done records a resync that ran at now.
func (g *resyncGate) done(now time.Time) {
	g.last, g.resynced, g.poisoned = now, true, false
}
