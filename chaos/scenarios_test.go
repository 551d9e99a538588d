package chaos

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestS01LeaderKillDuringBinds: concurrent clients bind and route sessions
// through all three nodes while the raft leader is killed with SIGKILL,
// then restarted on its data directory. The history must be linearizable,
// no session may be served by two engines, and no acknowledged binding
// may be lost.
func TestS01LeaderKillDuringBinds(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster; run without -short")
	}
	d := startDC(t, 3)
	h := bindLoadAround(t, d, func(step time.Duration) {
		victim := d.leader()
		t.Logf("killing leader %s", victim.id)
		d.kill(victim)
		time.Sleep(step)
		t.Logf("restarting %s", victim.id)
		d.restart(victim)
		d.waitReady(victim, 60*time.Second)
	})
	checkBindHistory(t, d, h)
}

// TestS02LeaderPauseDuringBinds: the same load while the raft leader is
// stopped with SIGSTOP for three election timeouts and then continued
// (the etcd #20418 class: a deposed leader that resumes must not serve
// stale state or acknowledge writes). The others elect a new leader
// meanwhile; requests sent to the paused node wait and then proceed. The
// same checks as S01 apply.
func TestS02LeaderPauseDuringBinds(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster; run without -short")
	}
	d := startDC(t, 3)
	h := bindLoadAround(t, d, func(time.Duration) {
		victim := d.leader()
		t.Logf("pausing leader %s", victim.id)
		d.signal(victim, syscall.SIGSTOP)
		time.Sleep(3 * time.Second) // three election timeouts
		t.Logf("resuming %s; leader now %s", victim.id, d.leader().id)
		d.signal(victim, syscall.SIGCONT)
	})
	checkBindHistory(t, d, h)
}

// bindLoadAround runs 8 clients binding and routing 200 sessions through
// every node of d for a phase, then fault (given the phase), then another
// phase, and returns the history.
func bindLoadAround(t *testing.T, d *dc, fault func(step time.Duration)) *history {
	t.Helper()
	sd := seed()
	t.Logf("seed %d (KVR_CHAOS_SEED replays it)", sd)
	h := newHistory()
	l := &load{d: d, h: h, sessions: 200, clients: 8, seed: sd}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.run(ctx); close(done) }()
	step := phase(3 * time.Second)
	time.Sleep(step)
	fault(step)
	time.Sleep(step)
	cancel()
	<-done
	return h
}

// checkBindHistory fails the test unless h is substantial, linearizable,
// serves no session by two engines and lost no acknowledged binding.
func checkBindHistory(t *testing.T, d *dc, h *history) {
	t.Helper()
	ok, unknown, sessions := summary(h)
	t.Logf("operations: %d served, %d indeterminate; %d sessions served", ok, unknown, sessions)
	if ok == 0 || sessions < 50 {
		t.Fatalf("workload too thin to mean anything: %d served over %d sessions", ok, sessions)
	}
	if dbl := doubleServed(h); len(dbl) > 0 {
		t.Fatalf("%d sessions served by two engines: %s", len(dbl), strings.Join(dbl, "; "))
	}
	if lost := verifyAll(t, d, h); len(lost) > 0 {
		t.Fatalf("%d acknowledged bindings lost: %s", len(lost), strings.Join(lost[:min(10, len(lost))], "; "))
	}
	checkLinearizable(t, h, t.TempDir())
}

// TestFullClusterRestart: after sessions are bound, all three nodes are
// killed at once with SIGKILL and restarted. Every acknowledged binding is
// back on every node, and routing resumes.
func TestFullClusterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster; run without -short")
	}
	sd := seed()
	t.Logf("seed %d", sd)
	d := startDC(t, 3)
	h := newHistory()
	l := &load{d: d, h: h, sessions: 100, clients: 4, seed: sd}
	ctx, cancel := context.WithTimeout(context.Background(), phase(2*time.Second))
	l.run(ctx)
	cancel()
	ok, _, sessions := summary(h)
	t.Logf("before the restart: %d served over %d sessions", ok, sessions)
	if sessions < 50 {
		t.Fatalf("only %d sessions served", sessions)
	}

	for _, m := range d.members {
		d.kill(m)
	}
	for _, m := range d.members {
		d.restart(m)
	}
	for _, m := range d.members {
		d.waitReady(m, 60*time.Second)
	}
	if lost := verifyAll(t, d, h); len(lost) > 0 {
		t.Fatalf("%d acknowledged bindings lost: %s", len(lost), strings.Join(lost[:min(10, len(lost))], "; "))
	}
	if dbl := doubleServed(h); len(dbl) > 0 {
		t.Fatalf("%d sessions served by two engines: %s", len(dbl), strings.Join(dbl, "; "))
	}
	// Routing resumes: a fresh session is served and bound.
	c := newClient(2000, h)
	if got := c.route(d.members[0], "fresh", 7); got == "" {
		t.Fatal("a new session was not served after the restart")
	}
	checkLinearizable(t, h, t.TempDir())
}
