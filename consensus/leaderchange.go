package consensus

import (
	"sync"

	"github.com/hashicorp/raft"
)

// leaderSignal tells waiters that the node's view of the leader changed:
// changed returns a channel that is closed at the next change. Forwards
// pending on a leader that was replaced are cancelled with it, and
// ApplyRetry retries at once instead of sleeping out its backoff (see
// forward.go), so a write on a follower moves to the new leader as soon as
// the follower knows it, not when a timeout or a backoff ends.
type leaderSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

func newLeaderSignal() *leaderSignal { return &leaderSignal{ch: make(chan struct{})} }

// changed returns the channel closed at the next change. Take it before
// reading the leader, so that a change between the two is not missed.
func (s *leaderSignal) changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

// fire wakes every waiter of the current channel.
func (s *leaderSignal) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.ch)
	s.ch = make(chan struct{})
}

// watchLeaderChanges fires n.leaderChange on every raft LeaderObservation
// (a follower learns a new leader from its first append, or loses the old
// one at its heartbeat timeout) until the node stops. raft drops an
// observation when the channel is full rather than block; one buffered
// slot suffices, since a waiter re-reads the leader after a wake-up.
func (n *Node) watchLeaderChanges() {
	defer n.wg.Done()
	ch := make(chan raft.Observation, 1)
	o := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(o)
	defer n.raft.DeregisterObserver(o)
	for {
		select {
		case <-n.stop:
			return
		case <-ch:
			n.leaderChange.fire()
		}
	}
}
