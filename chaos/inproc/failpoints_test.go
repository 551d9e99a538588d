//go:build chaos

package inproc

import (
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/internal/failpoint"
	"github.com/kvrouter/kvrouter/internal/waittest"
)

// TestS16RestoreHeldBeforeSwap holds a follower's snapshot install
// between its verification and its swap (restoreBeforeSwap) and checks
// that meanwhile the follower keeps serving its previous, whole state:
// the swap is the only moment the state changes.
func TestS16RestoreHeldBeforeSwap(t *testing.T) {
	c := newCluster(t, 3, func(cfg *consensus.Config) { cfg.TrailingLogs = 64 })
	l := c.waitLeader(5 * time.Second)
	f := c.follower(l)
	w := c.startLoad(2, seed(t))
	time.Sleep(100 * time.Millisecond)
	c.isolate(f)
	c.outrun(l, f, 64)
	if err := c.members[l].node.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	failpoint.Enable(failpoint.RestoreBeforeSwap, func() {
		select {
		case held <- struct{}{}:
			<-release
		default:
		}
	})
	defer failpoint.Disable(failpoint.RestoreBeforeSwap)
	fsm := c.members[f].node.FSM()
	before, hashBefore := fsm.StateHash()
	c.heal()
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the follower never reached restoreBeforeSwap")
	}
	// The window: the load goes on, and the leader commits 20 more
	// entries, none of which the held follower may apply.
	lr := c.members[l].node.Raft()
	commit := lr.CommitIndex()
	waittest.HoldsUntil(t, 30*time.Second, "the held follower's state", func() bool {
		idx, h := fsm.StateHash()
		return idx == before && h == hashBefore
	}, "the leader committed 20 more entries", func() bool { return lr.CommitIndex() >= commit+20 })
	close(release)
	w.stopLoad()
	c.converge(10 * time.Second)
	ops := w.history()
	if v := c.check(ops); !v.ok() {
		t.Fatalf("invariants violated: %+v", v)
	}
}

// TestFailpointsReached runs a workload with a snapshot, an install and
// a leader change, and checks that every failpoint planted in consensus
// and store was reached (relayBeforePublish is exercised by the relay's
// own tests).
func TestFailpointsReached(t *testing.T) {
	points := []string{failpoint.FSMBeforeApply, failpoint.FSMAfterApply, failpoint.ConsensusAfterCommitBeforeAck,
		failpoint.StoreBeforeSyncLogs, failpoint.StoreAfterSyncLogs, failpoint.SnapshotBeforePersist,
		failpoint.SnapshotAfterPersist, failpoint.RestoreBeforeSwap, failpoint.RestoreAfterSwap,
		failpoint.LeaderBeforeBarrier, failpoint.LeaderAfterBarrierBeforeReady}
	base := map[string]uint64{}
	for _, p := range points {
		base[p] = failpoint.Hits(p)
	}
	c := newCluster(t, 3, func(cfg *consensus.Config) { cfg.TrailingLogs = 64 })
	l := c.waitLeader(5 * time.Second)
	f := c.follower(l)
	w := c.startLoad(2, seed(t))
	c.isolate(f)
	c.outrun(l, f, 64)
	if err := c.members[l].node.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	c.heal()
	waittest.Until(t, 30*time.Second, "the follower installed the snapshot", func() bool {
		return failpoint.Hits(failpoint.RestoreAfterSwap) > base[failpoint.RestoreAfterSwap]
	})
	w.stopLoad()
	c.converge(10 * time.Second)
	for _, p := range points {
		if failpoint.Hits(p) == base[p] {
			t.Errorf("failpoint %s was never reached", p)
		}
	}
}
