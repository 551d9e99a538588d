package inproc

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
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
	stopLed := make(chan struct{})
	go func() { // The rebuilding member must not lead before it caught up.
		for {
			select {
			case <-stopLed:
				return
			default:
			}
			if m.node.IsLeader() && !m.node.CaughtUp() {
				ledEarly = true
			}
			time.Sleep(time.Millisecond)
		}
	}()
	rep.Figures["served_before_restored"] = servedBeforeRestored(t, m.node, acked)
	close(stopLed)
	rep.Figures["rebuild_ms"] = ms(time.Since(rebuildStart))
	rep.Figures["elected_before_rebuilt"] = ledEarly
	time.Sleep(phase(t, 200*time.Millisecond))
	w.stopLoad()
	rep.Converge = ms(c.converge(10 * time.Second))
	ops := w.history()
	rep.Unavail = ms(unavailability(ops, fault))
	rep.finish(t, ops, c.check(ops), start)
}
