package inproc

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// S16 SnapshotInstallUnderLoad: a follower is cut off until the leader
// compacted its log past it, then healed while binds go on; it catches up
// by InstallSnapshot. The restore must swap the state atomically: a
// reader of the follower's FSM never sees its applied index go back, nor
// fewer bindings than before (binds only add here), nor an empty state.
func TestS16SnapshotInstallUnderLoad(t *testing.T) {
	sd := seed(t)
	start := time.Now()
	rep := newReport(t, "S16SnapshotInstallUnderLoad", sd)
	c := newCluster(t, 3, snapshotSending)
	l := c.waitLeader(5 * time.Second)
	f := c.follower(l)
	w := c.startLoad(4, sd)
	time.Sleep(phase(t, 200*time.Millisecond))
	c.isolate(f)
	time.Sleep(phase(t, 500*time.Millisecond))
	c.outrun(l, f, 64)
	if err := c.members[l].node.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	snapIdx := c.members[l].node.Raft().Stats()["last_snapshot_index"]
	fm := c.members[f]
	var stale atomic.Int64
	var lastApplied uint64
	lastSessions := fm.node.FSM().NumSessions()
	stopReader := sample(t, 200*time.Microsecond, func() { // A reader of the follower's state during the install.
		applied, n := fm.node.FSM().AppliedIndex(), fm.node.FSM().NumSessions()
		if applied < lastApplied || n < lastSessions || (lastSessions > 0 && n == 0) {
			stale.Add(1)
		}
		lastApplied, lastSessions = max(lastApplied, applied), max(lastSessions, n)
	})
	heal := time.Now()
	c.heal()
	want, _ := strconv.ParseUint(snapIdx, 10, 64)
	install := waitFor(t, 10*time.Second, "the follower to install the leader's snapshot", func() bool {
		got, _ := strconv.ParseUint(fm.node.Raft().Stats()["last_snapshot_index"], 10, 64)
		return got >= want
	})
	rep.Figures["install_ms"] = ms(install)
	rep.Figures["snapshot_index"] = want
	time.Sleep(phase(t, 300*time.Millisecond))
	w.stopLoad()
	rep.Converge = ms(c.converge(10 * time.Second))
	stopReader()
	rep.Figures["stale_reads_during_install"] = stale.Load()
	if stale.Load() != 0 {
		t.Errorf("the follower's state went back or emptied %d times during the install", stale.Load())
	}
	ops := w.history()
	rep.Unavail = ms(unavailability(ops, heal))
	rep.finish(t, ops, c.check(ops), start)
}
