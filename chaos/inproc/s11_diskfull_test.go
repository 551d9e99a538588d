package inproc

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/consensus"
)

// S11 DiskFull: a member's free space drops below the store's reserve
// (and table writes fail with ENOSPC). The member must stop acknowledging
// with a typed error, report it (kvrouter_store_disk_full and readiness),
// hand its leadership over, and catch up once space returns; no
// acknowledged bind may be lost and no panic may occur.

func TestS11DiskFullLeader(t *testing.T)   { runDiskFull(t, "S11DiskFullLeader", true) }
func TestS11DiskFullFollower(t *testing.T) { runDiskFull(t, "S11DiskFullFollower", false) }

func runDiskFull(t *testing.T, name string, onLeader bool) {
	sd := seed(t)
	start := time.Now()
	rep := newReport(t, name, sd)
	c := newCluster(t, 3, nil)
	l := c.waitLeader(5 * time.Second)
	w := c.startLoad(4, sd)
	time.Sleep(phase(t, 300*time.Millisecond))

	victim := l
	if !onLeader {
		victim = c.follower(l)
	}
	m := c.members[victim]
	fault := time.Now()
	m.disk.full.Store(true)
	detect := waitFor(t, 5*time.Second, "the full member to report it and turn not ready", func() bool {
		return m.node.DiskFull() && !m.node.CaughtUp() && testutil.ToFloat64(m.storage.DiskFullGauge.WithLabelValues("raft")) == 1
	})
	rep.Figures["time_to_detect_ms"] = ms(detect)
	if onLeader {
		moved := waitFor(t, 5*time.Second, "the leadership to move off the full member", func() bool {
			nl := c.leader()
			return nl >= 0 && nl != victim
		})
		rep.Figures["leadership_moved_ms"] = ms(detect + moved)
	}
	time.Sleep(phase(t, 500*time.Millisecond))
	rep.sample()
	if c.leader() == victim {
		t.Fatal("the full member leads again")
	}

	freed := time.Now()
	m.disk.full.Store(false)
	rec := waitFor(t, 10*time.Second, "the member to recover once space returned", func() bool {
		return !m.node.DiskFull() && m.node.CaughtUp()
	})
	rep.Figures["recovery_ms"] = ms(rec)
	ops := c.settle(t, w, rep, fault, 200*time.Millisecond)

	diskFull, viaVictim := 0, 0
	for _, o := range ops {
		if errors.Is(o.err, consensus.ErrDiskFull) {
			diskFull++
		}
		if o.outcome == opOK && o.via == m.id && o.start.After(fault.Add(detect)) && o.start.Before(freed) {
			viaVictim++
		}
	}
	rep.Figures["refused_disk_full"] = diskFull
	rep.Figures["acked_by_full_member"] = viaVictim
	rep.Figures["enospc_injected"] = m.disk.enospc.Load()
	rep.Figures["write_errors_disk_full"] = testutil.ToFloat64(m.storage.WriteErrors.WithLabelValues("raft", "disk_full"))
	if g := testutil.ToFloat64(m.storage.DiskFullGauge.WithLabelValues("raft")); g != 0 {
		t.Errorf("kvrouter_store_disk_full{store=raft} = %v after recovery, want 0", g)
	}
	if viaVictim != 0 {
		t.Errorf("%d binds acknowledged by the member while its disk was full", viaVictim)
	}
	rep.finish(t, ops, c.check(ops), start)
}

// waitFor polls cond until it holds or d passes, and returns the time it
// took; it fails t on timeout.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", d, what)
	return 0
}
