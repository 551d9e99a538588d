package inproc

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/internal/metrics"
)

// S15 CorruptedStoreMinority: bit flips in an FSM table file (an sstable)
// of one follower. Pebble's block checksums catch it when the member
// loads its tables at restart; the member reports it, sets the store
// aside and rebuilds its tables from its raft log (and snapshots, or the
// leader's), and reports itself caught up only with every acknowledged
// bind in them. It must not lead meanwhile.
func TestS15CorruptedStoreMinority(t *testing.T) {
	sd := seed(t)
	start := time.Now()
	rep := newReport(t, "S15CorruptedStoreMinority", sd)
	c := newCluster(t, 3, nil)
	l := c.waitLeader(5 * time.Second)
	f := c.follower(l)
	w := c.startLoad(4, sd)
	time.Sleep(phase(t, 400*time.Millisecond))
	m := c.members[f]
	if err := m.fsm.Flush(); err != nil { // As a graceful stop does: the tables reach sstables.
		t.Fatal(err)
	}
	c.stop(f)
	fault := time.Now()
	acked := w.history()
	ssts := findMem(t, m.disk.mem, "fsm", ".sst")
	if len(ssts) == 0 {
		t.Fatal("no FSM sstable to corrupt")
	}
	for _, p := range ssts {
		flipMem(t, m.disk.mem, p)
	}
	c.start(f)
	rep.Figures["detected"] = m.rebuilt
	rep.Figures["corruption_metric"] = testutil.ToFloat64(m.storage.Corruptions.WithLabelValues("fsm", "table"))
	if !m.rebuilt {
		t.Fatal("the corrupt FSM store was not detected at restart")
	}
	rebuildStart := time.Now()
	ledEarly := false
	stopLed := sample(t, time.Millisecond, func() { // The rebuilding member must not lead before it caught up.
		if m.node.IsLeader() && !m.node.CaughtUp() {
			ledEarly = true
		}
	})
	rep.Figures["served_before_restored"] = servedBeforeRestored(t, m.node, acked)
	stopLed()
	rep.Figures["rebuild_ms"] = ms(time.Since(rebuildStart))
	rep.Figures["elected_before_rebuilt"] = ledEarly
	ops := c.settle(t, w, rep, fault, 200*time.Millisecond)
	rep.finish(t, ops, c.check(ops), start)
}

// S15 CorruptedStoreMinority, raft log: bit flips in the raft log store
// (its WAL and tables) of one follower. The log holds acknowledged
// entries and the member's vote, so nothing of the member can be
// trusted: at restart it finds the corruption by checksum, sets its whole
// state aside, has its old entry removed from the configuration before
// its raft runs, starts empty, rejoins as a nonvoter, receives the
// leader's snapshot and log, and is promoted to voter once caught up. It
// must serve no acknowledged bind missing, and end with the others' state
// hash.
func TestS15CorruptedRaftLogMinority(t *testing.T) {
	sd := seed(t)
	start := time.Now()
	rep := newReport(t, "S15CorruptedRaftLogMinority", sd)
	c := newCluster(t, 3, nil)
	l := c.waitLeader(5 * time.Second)
	f := c.follower(l)
	w := c.startLoad(4, sd)
	time.Sleep(phase(t, 300*time.Millisecond))
	m := c.members[f]
	c.stop(f)
	fault := time.Now()
	acked := w.history()
	files := append(findMem(t, m.disk.mem, "raft", ".log"), findMem(t, m.disk.mem, "raft", ".sst")...)
	if len(files) == 0 {
		t.Fatal("no raft log file to corrupt")
	}
	for _, p := range files {
		flipMem(t, m.disk.mem, p)
	}
	c.start(f)
	rep.Figures["detected"] = m.memberRebuilt
	rep.Figures["rebuild_metric"] = testutil.ToFloat64(metrics.NewRebuilds(m.metrics.Registerer()).Total.WithLabelValues("member"))
	if !m.memberRebuilt {
		t.Fatal("the corrupt raft log was not detected at restart")
	}
	if _, err := m.disk.mem.Stat(m.disk.mem.PathJoin(m.aside, "raft")); err != nil {
		t.Fatalf("the corrupt log was not kept for inspection in %q: %v", m.aside, err)
	}
	rep.Figures["served_before_restored"] = servedBeforeRestored(t, m.node, acked)
	waitFor(t, 20*time.Second, "the rebuilt member to vote again", func() bool { return c.suffrage(m.id) == raft.Voter })
	rep.Figures["rebuild_ms"] = ms(time.Since(fault))
	ops := c.settle(t, w, rep, fault, 100*time.Millisecond)
	rep.finish(t, ops, c.check(ops), start)
}

// suffrage is member id's suffrage in the ready leader's configuration
// (-1 when it is not in it or no leader is ready).
func (c *cluster) suffrage(id string) raft.ServerSuffrage {
	l := c.leader()
	if l < 0 {
		return -1
	}
	members, err := c.members[l].node.Members()
	if err != nil {
		return -1
	}
	for _, s := range members {
		if string(s.ID) == id {
			return s.Suffrage
		}
	}
	return -1
}
