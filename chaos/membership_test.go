package chaos

import (
	"testing"
	"time"
)

// TestS17MembershipChange: under the S01 binding load, a fourth member
// joins (it asks an existing member, which has the leader add it as a
// voter), then a follower is removed and stopped, a fifth member joins,
// and the leader itself is removed and stopped, leaving three members. The one checker runs over
// the history and the survivors. The rolling upgrade half of S17 is
// TestS17RollingUpgrade (upgrade_test.go).
func TestS17MembershipChange(t *testing.T) {
	chaosOnly(t)
	d := startDC(t, 3)
	rep := newReport(t, "S17 MembershipChange", "1 DC × 3 → 4 → 3 nodes")
	rep.watchDC(d)
	h := newHistory()
	stop := startLoad(&load{d: d, h: h, sessions: 200, clients: 8, seed: rep.Seed, fresh: 0.1})
	step := phase(3 * time.Second)
	time.Sleep(step)
	at := h.now()
	rep.FaultMS = at / 1e6

	n4 := join(t, d, d.members[0])
	time.Sleep(step / 2)

	leader := currentLeader(d, 30*time.Second)
	var follower *member
	for _, m := range d.live() {
		if m != leader && m != n4 {
			follower = m
			break
		}
	}
	t.Logf("removing follower %s", follower.id)
	runCLI(t, "cluster", "leave", "--addr", leader.api, "--id", follower.id)
	d.kill(follower)
	time.Sleep(step / 2)
	join(t, d, n4)
	time.Sleep(step / 2)

	leader = currentLeader(d, 30*time.Second)
	t.Logf("removing the leader %s", leader.id)
	removed := h.now()
	runCLI(t, "cluster", "leave", "--addr", leader.api, "--id", leader.id)
	d.kill(leader)
	time.Sleep(step)
	rep.HealMS = h.now() / 1e6
	if took, err := caughtUp(d, 30*time.Second); err != nil {
		rep.verdict("converge", err.Error())
	} else {
		rep.converged(took)
	}
	stop()
	if w, ok := firstBindAfter(h, removed); ok {
		rep.unavailable(w)
	}
	if n := len(d.live()); n != 3 {
		t.Fatalf("%d members live at the end, want 3", n)
	}
	checkAll(t, d, h, rep)
}

// join starts a new member that joins the cluster through via, and waits
// until it is ready.
func join(t *testing.T, d *dc, via *member) *member {
	t.Helper()
	d.mu.Lock()
	m := d.newMember()
	d.members = append(d.members, m)
	d.mu.Unlock()
	t.Logf("%s joins through %s", m.id, via.id)
	d.startWith(m, "--join", via.api)
	d.waitReady(m, 60*time.Second)
	return m
}
