package chaos

import (
	"net/url"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/fleet/natsbus"
)

// TestS10NATSOutage: the DC's NATS server (a separate server to the
// nodes, embedded in this test process with the engines) is stopped under
// the S01 binding load and started again on the same address after a
// phase. Routing must go on from the state the nodes hold (engines known,
// bindings in raft), everything must reconnect, and the one checker runs
// over the history. Figures: route success during the outage and the time
// until a fresh session is served after the restart.
func TestS10NATSOutage(t *testing.T) {
	chaosOnly(t)
	d := startDC(t, 3)
	rep := newReport(t, "S10 NATSOutage", "1 DC × 3 nodes, NATS server in the test process")
	rep.watchDC(d)
	u, err := url.Parse(d.nats)
	if err != nil {
		t.Fatal(err)
	}
	h := newHistory()
	stop := startLoad(&load{d: d, h: h, sessions: 200, clients: 8, seed: rep.Seed, fresh: 0.1})
	step := phase(3 * time.Second)
	time.Sleep(step)
	at := h.now()
	rep.FaultMS = at / 1e6
	t.Log("stopping NATS")
	d.mu.Lock()
	d.bus.Close()
	d.bus = nil
	d.mu.Unlock()
	time.Sleep(step)
	healAt := h.now()
	rep.HealMS = healAt / 1e6
	t.Log("starting NATS again")
	bus, err := natsbus.Open(natsbus.Config{URL: natsbus.Embedded, EmbeddedAddr: u.Host}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	d.bus = bus
	d.mu.Unlock()
	time.Sleep(step)
	stop()
	var during, duringOK int
	for _, o := range h.ops {
		if o.call >= at && o.call < healAt {
			during++
			if !o.unknown {
				duringOK++
			}
		}
	}
	if during > 0 {
		rep.figure("route_success_pct_during", 100*duringOK/during)
	}
	if w, ok := firstBindAfter(h, healAt); ok {
		rep.converged(w)
	}
	if w, ok := firstBindAfter(h, at); ok {
		rep.unavailable(w)
	}
	checkAll(t, d, h, rep)
}
