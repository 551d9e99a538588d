package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/mocker"
)

// relayPair is a DC's two relays, as a client behind one Service sees
// them: either gateway serves, and a refused connection is retried on the
// other.
type relayPair struct {
	dc    *dc
	relay [2]*relayProc
}

// startRelayPair starts two relays of d, each listing both relays of
// the peer DC (whose addresses are given) one by one.
func startRelayPair(t *testing.T, d *dc, gw, pub [2]string, peerDC string, peerGW, peerPub [2]string) *relayPair {
	t.Helper()
	peers := []string{
		fmt.Sprintf("%s=%s/%s/10ms", peerDC, peerPub[0], peerGW[0]),
		fmt.Sprintf("%s=%s/%s/10ms", peerDC, peerPub[1], peerGW[1]),
	}
	p := &relayPair{dc: d}
	for i := range 2 {
		p.relay[i] = startRelay(t, d, gw[i], pub[i], peers)
	}
	return p
}

// outcome is one request of the failover test as its client saw it.
type outcome struct {
	served
	retried bool
	// dirty is an answer cut after its status line by a gateway that was
	// not killed: the one failure a client cannot retry blindly, and a
	// product defect.
	dirty bool
	// cutByKill counts answers cut after their status line because the
	// client's own gateway was killed while writing them. No server can
	// finish such an answer; the client sees a broken connection and
	// retries on the DC's other gateway, as it does for a refused one.
	cutByKill int
}

// sendVia posts toks through the first of p's gateways, retrying once on
// the other when the first fails: before any answer (a refused or reset
// connection), or after its status line because that very gateway was
// killed, as a client behind a Service would.
func sendVia(c *http.Client, p *relayPair, first int, session string, toks []int) outcome {
	o := outcome{}
	for k := range 2 {
		r := p.relay[(first+k)%2]
		var cut bool
		o.served, cut = sendChecked(c, r.gateway, session, toks)
		switch {
		case o.err == nil:
			return o
		case cut && !r.killing.Load():
			o.dirty = true
			return o
		case cut:
			o.cutByKill++
		}
		o.retried = true
	}
	return o
}

// sendChecked is send that also tells an answer cut after its status
// line (dirty) from a failure before it.
func sendChecked(c *http.Client, gateway, session string, toks []int) (served, bool) {
	body, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "prompt": toks, "max_tokens": 1})
	req, _ := http.NewRequest("POST", "http://"+gateway+"/v1/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("X-Session-ID", session)
	}
	s := served{gateway: gateway, session: session}
	resp, err := c.Do(req)
	if err != nil {
		s.err = err
		return s, false
	}
	defer resp.Body.Close()
	s.status, s.dc, s.engine = resp.StatusCode, resp.Header.Get("X-Kvrouter-DC"), resp.Header.Get("X-Kvrouter-Worker")
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		s.err = err
		return s, true
	}
	return s, false
}

// stalenessOf asks a gateway's explain how stale its lane of dc is (-1
// when the gateway does not answer or has no such lane).
func stalenessOf(gateway, dc string) time.Duration {
	body, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "prompt": prompt(1, 2), "max_tokens": 1})
	c := http.Client{Timeout: time.Second}
	resp, err := c.Post("http://"+gateway+"/v1/route/explain", "application/json", bytes.NewReader(body))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var out struct {
		Remotes []struct {
			DC          string  `json:"dc"`
			Ready       bool    `json:"ready"`
			StalenessMs float64 `json:"staleness_ms"`
		} `json:"remotes"`
	}
	if json.NewDecoder(resp.Body).Decode(&out) != nil {
		return -1
	}
	for _, r := range out.Remotes {
		if r.DC == dc {
			return time.Duration(r.StalenessMs * float64(time.Millisecond))
		}
	}
	return -1
}

// stalenessWatch records the worst staleness each watched gateway
// reports for its lane of a DC, per phase.
type stalenessWatch struct {
	mu    sync.Mutex
	worst map[string]time.Duration // phase → worst
	phase string
}

func (w *stalenessWatch) setPhase(p string) {
	w.mu.Lock()
	w.phase = p
	w.mu.Unlock()
}

// run polls every 50 ms: each gateway of watch about its lane of the
// mapped DC, skipping gateways that do not answer (killed).
func (w *stalenessWatch) run(watch map[string]string, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
		for gw, dc := range watch {
			if s := stalenessOf(gw, dc); s >= 0 {
				w.mu.Lock()
				w.worst[w.phase] = max(w.worst[w.phase], s)
				w.mu.Unlock()
			}
		}
	}
}

// TestRelayFailoverTwoPerDC runs two DCs with two relays each, every
// relay listing both relays of the other DC, under steady traffic:
// prefix requests sent through a's gateways for prefixes cached in b (so
// forwarded to b) and session requests through both DCs. One relay of
// the forwarding DC a is killed with SIGKILL, later one of the serving DC
// b. Every failure must be clean (an answer refused before its status
// line, retried on the DC's other gateway, or an error status), no
// session may be served by two DCs, and forwarding must still work
// through the surviving relays. The test reports the share of failed
// requests and the worst staleness of the surviving relays' summaries.
func TestRelayFailoverTwoPerDC(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process relay failover; run without -short")
	}
	a, b := startNamedDC(t, "dca", 1, 2), startNamedDC(t, "dcb", 1, 2)
	var aGW, aPub, bGW, bPub [2]string
	for i := range 2 {
		aGW[i], aPub[i], bGW[i], bPub[i] = freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	}
	// b's relays start first so a's subscriptions find them; either
	// order converges, this one is quicker.
	rb := startRelayPair(t, b, bGW, bPub, "dca", aGW, aPub)
	ra := startRelayPair(t, a, aGW, aPub, "dcb", bGW, bPub)
	c := &http.Client{Timeout: 10 * time.Second}

	// Prefixes cached in b, which a's gateways forward to b once their
	// summaries arrived there.
	const prefixes = 8
	var longer [prefixes][]int
	for i := range prefixes {
		cached := prompt(7000+10*i, 48)
		if s := send(c, bGW[i%2], "", cached); s.status != 200 {
			t.Fatalf("warming b: %+v", s)
		}
		longer[i] = append(append([]int(nil), cached...), prompt(7001+10*i, 2)...)
	}
	for _, gw := range aGW {
		waitUntil(t, 20*time.Second, "a's gateways to see b's prefixes", func() bool {
			for i := range prefixes {
				if explain(gw, longer[i]) != "dcb" {
					return false
				}
			}
			return true
		})
	}

	var mu sync.Mutex
	var history []outcome
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for ci := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var o outcome
				switch i % 2 {
				case 0: // prefix traffic a → b
					o = sendVia(c, ra, ci+i, "", longer[(ci+i)%prefixes])
				default: // sessions, through either DC
					pair := []*relayPair{ra, rb}[(ci+i/2)%2]
					o = sendVia(c, pair, ci+i, fmt.Sprintf("f-%d", (ci*17+i)%30), prompt(9000+i%30, 4))
				}
				mu.Lock()
				history = append(history, o)
				mu.Unlock()
			}
		})
	}
	watch := &stalenessWatch{worst: map[string]time.Duration{}, phase: "steady"}
	watched := map[string]string{aGW[1]: "dcb", bGW[0]: "dca", bGW[1]: "dca"}
	stopWatch := make(chan struct{})
	var ww sync.WaitGroup
	ww.Go(func() { watch.run(watched, stopWatch) })

	time.Sleep(phase(2 * time.Second))
	t.Log("killing a's first relay (forwarding DC)")
	watch.setPhase("after killing a relay of a")
	ra.relay[0].kill()
	delete(watched, aGW[0])
	time.Sleep(phase(3 * time.Second))
	t.Log("killing b's first relay (serving DC)")
	watch.setPhase("after killing a relay of b")
	rb.relay[0].kill()
	time.Sleep(phase(3 * time.Second))
	close(stop)
	wg.Wait()
	close(stopWatch)
	ww.Wait()

	// Forwarding still works through the surviving relays, and with a
	// prefix cached in b after the kills.
	cached := prompt(8500, 48)
	if s := send(c, bGW[1], "", cached); s.status != 200 {
		t.Fatalf("warming b after the kills: %+v", s)
	}
	fresh := append(append([]int(nil), cached...), prompt(8501, 2)...)
	waitUntil(t, 20*time.Second, "a's surviving gateway to see b's new prefix", func() bool { return explain(aGW[1], fresh) == "dcb" })
	if s := send(c, aGW[1], "", fresh); s.status != 200 || s.dc != "dcb" {
		t.Fatalf("after the kills, a's request for b's prefix was served %+v", s)
	}
	checkFailover(t, history, watch)
}

// checkFailover checks and reports the failover history.
func checkFailover(t *testing.T, history []outcome, watch *stalenessWatch) {
	t.Helper()
	var failed, retried, forwarded, prefixReqs, cutByKill int
	where := map[string]map[string]bool{}
	for _, o := range history {
		if o.dirty {
			t.Errorf("a gateway that was not killed cut an answer after its status line: %+v", o.served)
		}
		cutByKill += o.cutByKill
		if o.retried {
			retried++
		}
		if o.err != nil || o.status != 200 {
			failed++
			continue
		}
		if o.session == "" {
			prefixReqs++
			if o.dc == "dcb" {
				forwarded++
			}
			continue
		}
		if where[o.session] == nil {
			where[o.session] = map[string]bool{}
		}
		where[o.session][o.dc] = true
	}
	for s, dcs := range where {
		if len(dcs) > 1 {
			t.Errorf("session %s served by %v", s, dcs)
		}
	}
	t.Logf("%d requests: %d failed (%.2f%%), %d retried on the DC's other gateway (%d of them cut after the status line by the death of the client's own gateway); %d of %d served prefix requests forwarded to b",
		len(history), failed, 100*float64(failed)/float64(max(1, len(history))), retried, cutByKill, forwarded, prefixReqs)
	for _, p := range []string{"steady", "after killing a relay of a", "after killing a relay of b"} {
		t.Logf("worst summary staleness %s: %v", p, watch.worst[p].Round(time.Millisecond))
	}
	if len(history) < 50 {
		t.Fatalf("only %d requests were sent", len(history))
	}
	if float64(forwarded) < 0.5*float64(prefixReqs) {
		t.Errorf("only %d of %d prefix requests were forwarded to b", forwarded, prefixReqs)
	}
}
