package inproc

import (
	"testing"
	"time"
)

// S12 SlowDisk: every fsync of the leader's stores takes syncDelay. The
// cluster must keep acknowledging with bounded queues: clients wait on
// their own bind (the write path holds no unbounded buffer), the
// goroutine count stays flat, and no acknowledged bind is lost. The
// report carries commit latency p50/p99 before and during the fault and
// the elections it caused.
func TestS12SlowDisk(t *testing.T) {
	const syncDelay = 100 * time.Millisecond
	sd := seed(t)
	start := time.Now()
	rep := newReport(t, "S12SlowDisk", sd)
	c := newCluster(t, 3, nil)
	l := c.waitLeader(5 * time.Second)
	w := c.startLoad(8, sd)
	base := time.Now()
	time.Sleep(phase(t, 500*time.Millisecond))
	rep.sample()
	baseGoroutines := rep.Goroutine

	fault := time.Now()
	term0 := c.members[l].node.Raft().Stats()["term"]
	c.members[l].disk.delay.Store(int64(syncDelay))
	deadline := time.Now().Add(phase(t, 2*time.Second))
	for time.Now().Before(deadline) {
		rep.sample()
		time.Sleep(50 * time.Millisecond)
	}
	healed := time.Now()
	c.members[l].disk.delay.Store(0)
	nl := c.waitLeader(5 * time.Second)
	ops := c.settle(t, w, rep, fault, 200*time.Millisecond)
	rep.Figures["sync_delay_ms"] = ms(syncDelay)
	rep.Figures["commit_p50_before_ms"] = ms(latencyQuantile(ops, base, fault, 0.5))
	rep.Figures["commit_p99_before_ms"] = ms(latencyQuantile(ops, base, fault, 0.99))
	rep.Figures["commit_p50_slow_ms"] = ms(latencyQuantile(ops, fault, healed, 0.5))
	rep.Figures["commit_p99_slow_ms"] = ms(latencyQuantile(ops, fault, healed, 0.99))
	rep.Figures["leader_changed"] = nl != l || c.members[nl].node.Raft().Stats()["term"] != term0
	rep.Figures["goroutines_before"] = baseGoroutines
	// Eight clients each wait on one bind: the slow disk may hold their
	// entries, but nothing may pile up behind them.
	if rep.Goroutine > baseGoroutines+64 {
		t.Errorf("goroutines grew from %d to %d under a slow disk", baseGoroutines, rep.Goroutine)
	}
	rep.finish(t, ops, c.check(ops), start)
}
