package consensus

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// CaughtUp reports whether the node may serve: a leader once it passed
// its barrier; a follower once it knows a leader, a ready leader told it
// its FSM's applied index (watchCatchUp), and this node's FSM applied that
// far. It stays true once reached (a follower that loses its leader later
// still answers from its applied state; writes go through raft and fail or
// wait there), so a restarted node serves nothing until it has caught up,
// and a running node does not flap with every election.
//
// The follower's own commit index is not enough: raft caps it at the
// follower's last log index, so a follower restarted from an older
// snapshot would see its commit index reached, and report itself caught
// up, while the leader had not yet sent it the entries past its own log.
// Nor is raft's applied index: raft counts an entry applied once it handed
// it to the FSM's goroutine, and a loaded follower that received a long
// log can have hundreds of entries queued there that reads cannot see yet
// (chaos S15 saw a rebuilt member report itself caught up 878 acknowledged
// binds short). So the FSM's own applied index is compared, with the
// leader's: a ready leader has applied every committed entry of earlier
// terms (its barrier) and acknowledges a write only once applied, so its
// applied index covers every acknowledged write. The leader's commit index
// would not do as the target: it can be a no-op or barrier entry, which
// raft hands to no FSM.
//
// The target is asked after this node started, once, and kept fixed: under
// a steady write load a target that moved with every poll stays a few
// entries ahead of the applied index forever, and the member never turned
// ready.
func (n *Node) CaughtUp() bool {
	if n.health.full() {
		return false // A full disk stops acknowledgements; storage.go.
	}
	if n.caughtUp.Load() {
		return true
	}
	ok := false
	if n.raft.State() == raft.Leader {
		ok = n.Ready()
	} else if _, id := n.raft.LeaderWithID(); id != "" {
		target := n.leaderApplied.Load()
		ok = target > 0 && n.fsm.AppliedIndex() >= target
	}
	if ok && n.caughtUp.CompareAndSwap(false, true) {
		n.log.Info("caught up; serving", "index", n.fsm.AppliedIndex(), "leader_applied", n.leaderApplied.Load())
	}
	return ok
}

// catchUpPoll is how often a node that has not caught up asks its leader
// for the leader's applied index: a few times per heartbeat timeout, so
// that a restarted follower turns ready soon after it applied the
// leader's entries, and at most every 100 ms.
func (n *Node) catchUpPoll() time.Duration {
	return min(n.cfg.HeartbeatTimeout/4, 100*time.Millisecond)
}

// watchCatchUp asks the leader for its applied index until the node has
// caught up (CaughtUp), then ends; it stops with the node.
func (n *Node) watchCatchUp() {
	defer n.wg.Done()
	t := time.NewTicker(n.catchUpPoll())
	defer t.Stop()
	for !n.CaughtUp() {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if n.raft.State() == raft.Leader {
			continue
		}
		if _, id := n.raft.LeaderWithID(); id != "" {
			n.learnLeaderApplied(id)
		}
	}
}

// learnLeaderApplied asks member id for its applied index over the
// cluster API and records it if id still leads and is ready. Errors are
// logged at debug: the next poll retries, and until one succeeds the node
// does not serve.
func (n *Node) learnLeaderApplied(id raft.ServerID) {
	// Status hashes the leader's whole state, which under load on a large
	// FSM takes longer than a heartbeat timeout; a bound that short never
	// let a busy leader answer.
	ctx, cancel := n.untilStop(max(4*n.cfg.HeartbeatTimeout, 2*time.Second))
	defer cancel()
	applied, err := n.askApplied(ctx, id)
	if err != nil {
		n.log.Debug("asking the leader for its applied index", "leader", id, "err", err)
		return
	}
	// The first answer is the target (see CaughtUp); later ones change
	// nothing.
	n.leaderApplied.CompareAndSwap(0, applied)
}

// askApplied returns member id's FSM applied index when it answers as a
// leader that passed its barrier.
func (n *Node) askApplied(ctx context.Context, id raft.ServerID) (uint64, error) {
	cc, err := n.conn(id)
	if err != nil {
		return 0, err
	}
	st, err := kvrpb.NewClusterAdminClient(cc).Status(ctx, &kvrpb.AdminStatusRequest{})
	if err != nil {
		return 0, err
	}
	if st.GetState() != raft.Leader.String() {
		return 0, fmt.Errorf("%w: %s answers as %s", ErrNoLeader, id, st.GetState())
	}
	if !st.GetReady() {
		return 0, fmt.Errorf("%w: %s leads but has not passed its barrier", ErrNoLeader, id)
	}
	return st.GetAppliedIndex(), nil
}
