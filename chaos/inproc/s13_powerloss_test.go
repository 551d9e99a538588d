package inproc

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// S13 PowerLossMinority (Jepsen's pause-kill): a follower B is cut off,
// binds go on through the leader L and the other follower A, then A loses
// power (its disk keeps only what was synced, and it syncs nothing more)
// while L is cut off in turn.
// A restarts from the crash image and forms a majority with the stale B:
// if A had acknowledged an append it had not synced, the new majority
// would elect a leader without it and lose acknowledged binds. Then
// everything heals and every member must agree.
func TestS13PowerLossMinority(t *testing.T) {
	sd := seed(t)
	start := time.Now()
	rep := newReport(t, "S13PowerLossMinority", sd)
	c := newCluster(t, 3, nil)
	l := c.waitLeader(5 * time.Second)
	a := c.follower(l)
	b := c.follower(l, a)
	w := c.startLoad(4, sd)
	time.Sleep(phase(t, 200*time.Millisecond))

	c.isolate(b) // B paused: it misses what follows.
	time.Sleep(phase(t, 500*time.Millisecond))
	fault := time.Now()
	img := c.members[a].disk.powerLoss() // A's power fails here: it syncs, so acknowledges, nothing more.
	c.isolate(l)                         // L stays up but cut off: only A and B can form a majority.
	// Once L has stepped down, nothing A would still sync can commit
	// there; then A's blocked syncs may go on (into the disk it leaves)
	// and A can be stopped.
	waitFor(t, 5*time.Second, "the cut-off leader to step down", func() bool {
		return c.members[l].node.Raft().State() != raft.Leader
	})
	c.members[a].disk.release()
	c.stop(a)
	c.members[a].disk = img
	c.start(a)
	c.cut = map[[2]int]bool{link(l, a): true, link(l, b): true}
	c.connect() // A and B reconnect to each other; L stays cut off.
	nl := c.waitLeader(10*time.Second, a, b)
	rep.Figures["new_leader"] = c.members[nl].id
	rep.Figures["failover_ms"] = ms(time.Since(fault))

	// Every bind acknowledged so far must be on the A+B side already.
	time.Sleep(phase(t, 200*time.Millisecond))
	ops := w.history()
	waitFor(t, 5*time.Second, "the A+B majority to apply its commit index", func() bool {
		n := c.members[nl].node
		return n.Raft().AppliedIndex() >= n.Raft().CommitIndex()
	})
	lostBeforeHeal := 0
	for _, o := range ops {
		if o.outcome != opOK {
			continue
		}
		if bnd, ok := c.members[nl].node.FSM().Session(o.key); !ok || bnd.GetVersion() != o.version {
			lostBeforeHeal++
		}
	}
	rep.Figures["lost_on_new_majority"] = lostBeforeHeal
	if lostBeforeHeal != 0 {
		t.Errorf("%d acknowledged binds missing on the majority formed after the power loss", lostBeforeHeal)
	}

	c.heal()
	ops = c.settle(t, w, rep, fault, 200*time.Millisecond)
	rep.finish(t, ops, c.check(ops), start)
}
