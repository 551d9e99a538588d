package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// S22's fleet and load. The engines run at half the reference
// hardware's speed (a 48-token prefill plus one token takes one iteration
// of about 16 ms), and a node sees an engine as busy once it has routed it
// more than s22PrefillThreshold prompt tokens not yet prefilled: two of
// the load's uncached requests at a time. Capacity is then set by the
// engines and the thresholds rather than by the test machine's CPU. The
// load is an open loop (requests start at a fixed rate whatever the
// answers take, as from many independent clients), so that the overload
// phase offers five times the nominal rate, as the plan's row says, and,
// with these figures, two to three times what the fleet accepts.
const (
	s22Engines          = 3
	s22SpeedUp          = 0.1
	s22PrefillThreshold = "48"
	s22NominalRate      = 30 // requests per second
	// s22SessionRate of them carry a session, in every phase: requests
	// of a bound session go to its engine whatever its load (hard
	// affinity dispatches them exactly), so the overload is stateless
	// traffic, which the busy thresholds shed.
	s22SessionRate = 20
	// s22Fresh is the share of requests that bind a new session; the
	// rest route one of a pool of s22Sessions. Every session served is verified
	// on every node afterwards, one slow request at a time, so the share
	// is kept small.
	s22Fresh = 0.05
	// s22Sessions is the pool's size.
	s22Sessions = 100
	// s22OverloadStatus is the node's --overload-status default.
	s22OverloadStatus = 529
	// s22MaxInFlight bounds the open loop's requests in flight; an
	// overload answered at once never comes near it.
	s22MaxInFlight = 512
)

// TestS22Overload: a three-node DC, its engines behind busy thresholds,
// takes an open-loop load at the nominal rate (below capacity), then five
// times that rate (about twice what the fleet accepts), then the nominal
// rate again. A steady s22SessionRate of the requests carry a session
// (the S01 binding workload the checker verifies); the rest are
// stateless. Under overload the excess is shed at once with 529 (no
// queue is configured) while the accepted requests keep a bounded
// latency; no request waits for the client's timeout or gets any other
// status; no acknowledged binding is lost (the one checker); the nodes'
// memory and goroutines stay bounded and return near their level before
// the load; and the nominal rate is served as before once the overload
// ends, without a restart. The shed share, the accepted p99, the p99 of
// the shed answers and the offered and accepted rates of every phase are
// figures.
func TestS22Overload(t *testing.T) {
	chaosOnly(t)
	d := startDCWith(t, "dc1", 3, func(d *dc, ctx context.Context, wg *sync.WaitGroup) {
		for id := range s22Engines {
			startEngineAt(t, ctx, wg, d.nats, "dc1", uint64(id+1), s22SpeedUp)
		}
	}, "--active-prefill-tokens-threshold", s22PrefillThreshold)
	rep := newReport(t, "S22 Overload", fmt.Sprintf("1 DC × 3 nodes, %d engines at 1×, --active-prefill-tokens-threshold %s", s22Engines, s22PrefillThreshold))
	rep.watchDC(d)
	goroutines0 := goroutinesOf(d)
	h := newHistory()
	// Stateless requests have no session to check; they share h's clock.
	hs := &history{base: h.base}
	step := phase(3 * time.Second)
	run := func(rate int, seed uint64) (from, to int64) {
		from = h.now()
		offerOpenLoad(d, h, hs, rate, step, seed)
		return from, h.now()
	}
	stats := func(from, to int64) s22Phase { return s22Stats(from, to, h, hs) }
	nominal := stats(run(s22NominalRate, rep.Seed))
	at, healAt := run(5*s22NominalRate, rep.Seed+1)
	rep.FaultMS, rep.HealMS = at/1e6, healAt/1e6
	over := stats(at, healAt)
	after := stats(run(s22NominalRate, rep.Seed+2))
	bound := s22Stats(at, healAt, h)
	rep.figure("bound_accepted_p99_ms", bound.p99(bound.okLat).Milliseconds())
	rep.figure("bound_shed_pct", fmt.Sprintf("%.1f", bound.shedPct()))
	t.Logf("overload, session requests only: %s", bound)
	for name, s := range map[string]s22Phase{"nominal": nominal, "overload": over, "after": after} {
		s.report(rep, name)
		t.Logf("%s: %s", name, s)
	}
	s22Check(t, nominal, over, after)
	if w, ok := firstBindAfter(h, healAt); ok {
		rep.converged(w)
	} else {
		t.Error("no new binding after the overload ended")
	}
	s22CheckSettled(t, d, rep, goroutines0)
	checkAll(t, d, h, rep)
}

// s22Check asserts what an operator expects of overload: shedding, not
// waiting; only 200 and 529; the nominal rate served again afterwards.
func s22Check(t *testing.T, nominal, over, after s22Phase) {
	t.Helper()
	if over.shed == 0 || over.offeredOverAccepted() < 1.5 {
		t.Errorf("the overload phase did not go over capacity: %s", over)
	}
	for _, s := range []s22Phase{over, after} {
		if s.timeouts > 0 || len(s.other) > 0 {
			t.Errorf("%d client timeouts and other answers %v: overload must be shed with %d", s.timeouts, s.other, s22OverloadStatus)
		}
	}
	// Liveness bounds, far above the figures: a shed answer that takes
	// seconds is no backpressure, and an accepted request must not queue
	// behind the overload inside the node.
	if p := over.p99(over.shedLat); p > 2*time.Second {
		t.Errorf("shed answers p99 %v", p)
	}
	if p := over.p99(over.okLat); p > 5*time.Second {
		t.Errorf("accepted requests p99 %v under overload", p)
	}
	// A session's requests go to its engine only (hard affinity), so
	// even the nominal rate sheds a little when several meet there.
	if after.shedPct() > nominal.shedPct()+5 {
		t.Errorf("after the overload %.1f%% of the nominal load is shed, %.1f%% before it", after.shedPct(), nominal.shedPct())
	}
}

// s22CheckSettled waits for the nodes to settle after the load and
// checks their goroutines came back near their level before it and that
// their peak memory stayed bounded.
func s22CheckSettled(t *testing.T, d *dc, rep *report, before map[string]float64) {
	t.Helper()
	const slack = 100 // connections and timers still closing
	deadline := time.Now().Add(15 * time.Second)
	for {
		now := goroutinesOf(d)
		var over []string
		for id, g := range now {
			if g > before[id]+slack {
				over = append(over, fmt.Sprintf("%s %v→%v", id, before[id], g))
			}
		}
		if len(over) == 0 {
			rep.verdict("goroutines_settled", "ok")
			break
		}
		if time.Now().After(deadline) {
			rep.verdict("goroutines_settled", strings.Join(over, " "))
			t.Errorf("goroutines did not settle after the overload: %s", strings.Join(over, ", "))
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	for _, m := range d.members {
		if rss := rep.peakRSS(m.id); rss > 512 {
			t.Errorf("%s peaked at %.0f MiB of RSS", m.id, rss)
		}
	}
}

// offerOpenLoad starts rate requests a second through the members for
// dur, each without waiting for the others, and waits for the last
// answer. s22SessionRate of them a second carry a session, drawn as
// load.run does (a pool of s22Sessions, s22Fresh of them fresh), and are
// recorded in h for the checker; the rest carry none (stateless traffic,
// recorded in hs). Every prompt is a new one.
func offerOpenLoad(d *dc, h, hs *history, rate int, dur time.Duration, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0))
	// One connection pool for all: a real client fleet keeps its
	// connections, and a fresh one per request would measure the
	// machine's connection setup instead of the nodes.
	shared := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: s22MaxInFlight}}
	defer shared.CloseIdleConnections()
	idle := make(chan *client, s22MaxInFlight)
	for i := range s22MaxInFlight {
		idle <- &client{id: i, http: shared}
	}
	var wg sync.WaitGroup
	start := time.Now()
	next := freshBase * (1000 + int(seed%1000))
	for sent := 0; ; {
		elapsed := time.Since(start)
		if elapsed >= dur {
			break
		}
		for ; sent < int(elapsed.Seconds()*float64(rate)); sent++ {
			m, s, prompt := d.pick(rng), rng.IntN(s22Sessions), rng.IntN(1<<30)
			if rng.Float64() < s22Fresh {
				s, next = next, next+1
			}
			session, into := "s-"+strconv.Itoa(s), h
			if rng.Float64() >= float64(s22SessionRate)/float64(rate) {
				session, into = "", hs
			}
			c := <-idle
			wg.Go(func() {
				c.h = into
				c.route(m, session, prompt)
				c.h = nil
				idle <- c
			})
		}
		time.Sleep(2 * time.Millisecond)
	}
	wg.Wait()
}

// goroutinesOf reads every member's go_goroutines.
func goroutinesOf(d *dc) map[string]float64 {
	out := map[string]float64{}
	for id, w := range dcProcs(d) {
		out[id] = scrapeGauge(httpClient2s, w.metrics, "go_goroutines")
	}
	return out
}

var httpClient2s = &http.Client{Timeout: 2 * time.Second}

// s22Phase is one load phase's answers.
type s22Phase struct {
	seconds        float64
	ok, shed       int
	timeouts       int
	other          map[string]int
	okLat, shedLat []time.Duration
}

// s22Stats sums the operations of hists that started in [from, to).
func s22Stats(from, to int64, hists ...*history) s22Phase {
	s := s22Phase{seconds: float64(to-from) / 1e9, other: map[string]int{}}
	for _, h := range hists {
		h.mu.Lock()
		for _, o := range h.ops {
			if o.call >= from && o.call < to {
				s.add(o)
			}
		}
		h.mu.Unlock()
	}
	return s
}

// add counts one operation.
func (s *s22Phase) add(o op) {
	lat := time.Duration(o.ret - o.call)
	switch {
	case !o.unknown:
		s.ok++
		s.okLat = append(s.okLat, lat)
	case o.status == s22OverloadStatus:
		s.shed++
		s.shedLat = append(s.shedLat, lat)
	case strings.Contains(o.err, "Client.Timeout"):
		s.timeouts++
	default:
		s.other[strconv.Itoa(o.status)+" "+firstWords(o.err, 6)]++
	}
}

// offered is every answered request; offeredOverAccepted is how far the
// phase was over what the fleet accepted.
func (s s22Phase) offered() int { return s.ok + s.shed + s.timeouts + len(s.other) }

func (s s22Phase) offeredOverAccepted() float64 {
	return float64(s.offered()) / float64(max(1, s.ok))
}

func (s s22Phase) shedPct() float64 { return 100 * float64(s.shed) / float64(max(1, s.offered())) }

// p99 is the 99th percentile of lat (0 when empty).
func (s s22Phase) p99(lat []time.Duration) time.Duration { return s.quantile(lat, 0.99) }

// quantile is the q-quantile of lat (0 when empty).
func (s s22Phase) quantile(lat []time.Duration, q float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	l := slices.Clone(lat)
	slices.Sort(l)
	return l[int(float64(len(l))*q)]
}

func (s s22Phase) String() string {
	return fmt.Sprintf("offered %.0f/s, accepted %.0f/s (offered/accepted %.2f), shed %.1f%%, accepted p50 %v p99 %v, shed p99 %v, timeouts %d, other %v",
		float64(s.offered())/s.seconds, float64(s.ok)/s.seconds, s.offeredOverAccepted(), s.shedPct(),
		s.quantile(s.okLat, 0.5), s.p99(s.okLat), s.p99(s.shedLat), s.timeouts, s.other)
}

// report writes the phase's figures, prefixed by its name but for the
// overload phase's.
func (s s22Phase) report(rep *report, name string) {
	if name == "overload" {
		name = ""
	} else {
		name += "_"
	}
	rep.figure(name+"offered_rps", int(float64(s.offered())/s.seconds))
	rep.figure(name+"accepted_rps", int(float64(s.ok)/s.seconds))
	rep.figure(name+"shed_pct", fmt.Sprintf("%.1f", s.shedPct()))
	rep.figure(name+"accepted_p99_ms", s.p99(s.okLat).Milliseconds())
	if s.shed > 0 {
		rep.figure(name+"shed_p99_ms", s.p99(s.shedLat).Milliseconds())
	}
	rep.Ops[name+strconv.Itoa(s22OverloadStatus)] = s.shed
	rep.Ops[name+"accepted"] = s.ok
	rep.figure(name+"client_timeouts", s.timeouts)
}

// firstWords is the first n words of s.
func firstWords(s string, n int) string {
	f := strings.Fields(s)
	return strings.Join(f[:min(n, len(f))], " ")
}
