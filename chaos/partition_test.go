package chaos

import (
	"context"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// chaosOnly skips a scenario outside `make chaos` (KVRTEST_CHAOS_SECONDS
// unset): the multi-process tier would cost `make test` minutes.
func chaosOnly(t *testing.T) {
	t.Helper()
	if testing.Short() || os.Getenv("KVRTEST_CHAOS_SECONDS") == "" {
		t.Skip("multi-process scenario of make chaos: set KVRTEST_CHAOS_SECONDS")
	}
}

// startLoad runs l until the returned stop is called.
func startLoad(l *load) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// leaseSlack is how long after a partition a minority may still
// acknowledge: the leader lease (500 ms) and a request in flight.
const leaseSlack = 1500 * time.Millisecond

// TestS03LeaderIsolated: the raft leader's peer links (raft and cluster
// API, both directions) are blackholed under the S01 load, with clients
// attached to both sides, then healed. The majority elects a new leader;
// the isolated one must stop acknowledging new binds once its lease ran
// out; after the heal every member catches up. The one checker runs on the
// history.
func TestS03LeaderIsolated(t *testing.T) {
	runPartition(t, "S03 LeaderIsolated", func(d *dc) *member { return d.leader() })
}

// TestS03MinorityPartition: the same with a follower cut off: the
// majority keeps its leader, the follower must not acknowledge new binds.
func TestS03MinorityPartition(t *testing.T) {
	runPartition(t, "S03 MinorityPartition", func(d *dc) *member {
		l := d.leader()
		for _, m := range d.members {
			if m != l {
				return m
			}
		}
		return nil
	})
}

func runPartition(t *testing.T, name string, victimOf func(*dc) *member) {
	chaosOnly(t)
	d := startProxiedDC(t, "dc1", 3, 3)
	rep := newReport(t, name, "1 DC × 3 nodes, proxied raft and API links")
	rep.watchDC(d)
	h := newHistory()
	stop := startLoad(&load{d: d, h: h, sessions: 200, clients: 8, seed: rep.Seed, fresh: 0.3, timeout: 2 * time.Second})
	step := phase(3 * time.Second)
	time.Sleep(step)
	victim := victimOf(d)
	at := h.now()
	rep.FaultMS = at / 1e6
	t.Logf("isolating %s", victim.id)
	d.net.isolate(victim)
	time.Sleep(step)
	healAt := h.now()
	rep.HealMS = healAt / 1e6
	t.Log("healing")
	d.net.heal()
	if took, err := caughtUp(d, 30*time.Second); err != nil {
		rep.verdict("converge", err.Error())
	} else {
		rep.converged(took)
	}
	time.Sleep(step)
	stop()
	if w, ok := firstBindAfter(h, at); ok {
		rep.unavailable(w)
	}
	acks := minorityBinds(h, victim, at+int64(leaseSlack), healAt)
	rep.figure("minority_acks_after_lease", acks)
	if acks > 0 {
		t.Errorf("%d new bindings acknowledged by the isolated %s after its lease", acks, victim.id)
	}
	checkAll(t, d, h, rep)
}

// minorityBinds counts the sessions first tried through m in [from, to)
// (no operation of them, acknowledged or not, was sent before) and
// acknowledged there before to: bindings the isolated side could only
// have made without a quorum.
func minorityBinds(h *history, m *member, from, to int64) int {
	first := map[string]op{}
	for _, o := range h.ops {
		if f, ok := first[o.session]; !ok || o.call < f.call {
			first[o.session] = o
		}
	}
	n := 0
	for _, o := range h.ops {
		f := first[o.session]
		if !o.unknown && o.node == m.id && f.node == m.id && f.call >= from && f.call < to && o.ret < to {
			n++
			first[o.session] = op{} // count a session once
		}
	}
	return n
}

// TestS04FlappingPartitions (hashicorp/raft fuzzy LeaderPartitions): five
// members under a continuous binding load; ten rounds each cut the leader
// and a random peer off from the other three, then heal none, one or all
// of the links; a final heal. Every acknowledged binding survives, the
// history is linearizable, the members end with equal state hashes.
// Elections per minute and goodput are figures.
func TestS04FlappingPartitions(t *testing.T) {
	chaosOnly(t)
	d := startProxiedDC(t, "dc1", 5, 3)
	rep := newReport(t, "S04 FlappingPartitions", "1 DC × 5 nodes, proxied raft and API links")
	rep.watchDC(d)
	rng := rand.New(rand.NewPCG(rep.Seed, 4))
	h := newHistory()
	term0 := maxTerm(d)
	stop := startLoad(&load{d: d, h: h, sessions: 200, clients: 8, seed: rep.Seed, fresh: 0.3, timeout: 2 * time.Second})
	time.Sleep(phase(2*time.Second) / 2)
	round := max(phase(2*time.Second)/2, time.Second)
	start := h.now()
	rep.FaultMS = start / 1e6
	for i := range 10 {
		// Each round replaces the previous partition, so a majority side
		// always exists (three of five).
		d.net.heal()
		l := currentLeader(d, 30*time.Second)
		if l == nil {
			t.Fatalf("round %d: no leader", i)
		}
		peer := d.members[rng.IntN(len(d.members))]
		for peer == l {
			peer = d.members[rng.IntN(len(d.members))]
		}
		var rest []*member
		for _, m := range d.members {
			if m != l && m != peer {
				rest = append(rest, m)
			}
		}
		at := h.now()
		d.net.partition([]*member{l, peer}, rest)
		time.Sleep(round)
		if w, ok := firstBindAfter(h, at); ok {
			rep.unavailable(w)
		}
		switch heal := rng.IntN(3); heal {
		case 0: // none
		case 1:
			d.net.unblock(rest[rng.IntN(len(rest))])
		default:
			d.net.heal()
		}
		t.Logf("round %d: cut %s+%s off", i, l.id, peer.id)
	}
	d.net.heal()
	end := h.now()
	rep.HealMS = end / 1e6
	if took, err := caughtUp(d, 30*time.Second); err != nil {
		rep.verdict("converge", err.Error())
	} else {
		rep.converged(took)
	}
	time.Sleep(round)
	stop()
	flapping := time.Duration(end - start)
	elections := maxTerm(d) - term0
	rep.figure("elections_per_min", int(float64(elections)/flapping.Minutes()))
	good := 0
	for _, o := range h.ops {
		if !o.unknown && o.call >= start && o.ret <= end {
			good++
		}
	}
	rep.figure("goodput_per_s", int(float64(good)/flapping.Seconds()))
	checkAll(t, d, h, rep)
}

// currentLeader is the live member that reports itself leader at the
// highest term (a deposed leader may not know yet), or nil.
func currentLeader(d *dc, within time.Duration) *member {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var best *member
		var term uint64
		for _, m := range d.live() {
			if st, err := adminStatus(m.api); err == nil && st.GetState() == "Leader" && st.GetTerm() >= term {
				best, term = m, st.GetTerm()
			}
		}
		if best != nil {
			return best
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// maxTerm is the highest raft term a live member reports.
func maxTerm(d *dc) uint64 {
	var term uint64
	for _, m := range d.live() {
		if st, err := adminStatus(m.api); err == nil {
			term = max(term, st.GetTerm())
		}
	}
	return term
}
