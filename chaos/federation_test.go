package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/netem"
	"github.com/kvrouter/kvrouter/mocker"
)

// relayProc is one DC's `kvrouter relay` process.
type relayProc struct {
	d               *dc
	gateway, public string // gateway address; publish address
	peerArgs        []string
	log             string
	cmd             *exec.Cmd
	exited          chan struct{}
}

// startRelay launches the relay of d with the given --peer-dcs values.
func startRelay(t *testing.T, d *dc, gateway, publish string, peers []string) *relayProc {
	t.Helper()
	r := &relayProc{d: d, gateway: gateway, public: publish, peerArgs: peers,
		log: filepath.Join(t.TempDir(), d.name+"-relay.log")}
	r.start(t)
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			if b, err := os.ReadFile(r.log); err == nil {
				lines := strings.Split(string(b), "\n")
				t.Logf("---- relay %s ----\n%s", d.name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		}
	})
	return r
}

func (r *relayProc) start(t *testing.T) {
	t.Helper()
	var nodes, apis []string
	for _, m := range r.d.members {
		nodes = append(nodes, "http://"+m.http)
		apis = append(apis, m.api)
	}
	logf, err := os.OpenFile(r.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(binary, "relay", "--dc", r.d.name, "--nats", r.d.nats,
		"--nodes", strings.Join(nodes, ","), "--cluster-apis", strings.Join(apis, ","),
		"--gateway-addr", r.gateway, "--publish-addr", r.public, "--peer-dcs", strings.Join(r.peerArgs, ","),
		"--pools", fmt.Sprintf("%s:%d", mocker.DefaultModel, blockSize), "--heartbeat-interval", "200ms",
		"--max-staleness", "2s")
	r.cmd.Stdout, r.cmd.Stderr, r.cmd.Env = logf, logf, childEnv()
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); _ = logf.Close(); close(done) }(r.cmd, r.exited)
	waitUntil(t, 30*time.Second, "relay "+r.d.name+" ready", func() bool {
		resp, err := http.Get("http://" + r.gateway + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

func (r *relayProc) kill() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.exited
		r.cmd = nil
	}
}

func waitUntil(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// served is one request through a gateway as the client saw it.
type served struct {
	gateway, session, dc, engine string
	status                       int
	err                          error
}

// send posts a completion of toks through a gateway.
func send(c *http.Client, gateway, session string, toks []int) served {
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
		return s
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	s.status, s.dc, s.engine = resp.StatusCode, resp.Header.Get("X-Kvrouter-DC"), resp.Header.Get("X-Kvrouter-Worker")
	return s
}

// explain asks a gateway which DC its prefix policy would send toks to,
// without serving them ("" on failure).
func explain(gateway string, toks []int) string {
	body, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "prompt": toks, "max_tokens": 1})
	resp, err := http.Post("http://"+gateway+"/v1/route/explain", "application/json", bytes.NewReader(body))
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var out struct {
		DC string `json:"dc"`
	}
	if json.NewDecoder(resp.Body).Decode(&out) != nil {
		return ""
	}
	return out.DC
}

func prompt(seed, blocks int) []int {
	out := make([]int, blocks*blockSize)
	for i := range out {
		out[i] = (seed*7919 + i*31) % 32000
	}
	return out
}

// TestFederationRelayKillAndWANCut: two DCs (a router node, two engines
// and a relay each, as processes where they are ours), their relays
// linked through a proxy per direction standing in for the WAN. Clients
// send session traffic and prefix traffic through both gateways while the
// WAN is cut and restored and one relay is killed and restarted. During
// the cut each DC keeps serving its own traffic; after it the summaries
// reconverge (a prefix cached in one DC during the cut draws the other
// DC's request to it); and no session is ever served by two DCs or two
// engines.
func TestFederationRelayKillAndWANCut(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process federation; run without -short")
	}
	a, b := startNamedDC(t, "dca", 1, 2), startNamedDC(t, "dcb", 1, 2)
	aGW, aPub, bGW, bPub := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	// One proxy per direction and service: a's view of b, b's view of a.
	const oneWay = 5 * time.Millisecond
	toBPub, toBGW := mustProxy(t, bPub, oneWay), mustProxy(t, bGW, oneWay)
	toAPub, toAGW := mustProxy(t, aPub, oneWay), mustProxy(t, aGW, oneWay)
	wan := []*netem.Proxy{toBPub, toBGW, toAPub, toAGW}
	ra := startRelay(t, a, aGW, aPub, []string{fmt.Sprintf("dcb=%s/%s/10ms", toBPub.Addr(), toBGW.Addr())})
	startRelay(t, b, bGW, bPub, []string{fmt.Sprintf("dca=%s/%s/10ms", toAPub.Addr(), toAGW.Addr())})

	c := &http.Client{Timeout: 10 * time.Second}
	var mu sync.Mutex
	var history []served
	record := func(s served) served {
		mu.Lock()
		history = append(history, s)
		mu.Unlock()
		return s
	}
	// forwardedTo waits until a prompt cached in one DC, sent through the
	// other's gateway, is served by the first: its summary reached the
	// other relay and the gateway forwarded.
	forwardedTo := func(what, via string, holder *dc, seed int) {
		t.Helper()
		cached := prompt(seed, 48)
		if s := record(send(c, map[*dc]string{a: aGW, b: bGW}[holder], "", cached)); s.status != 200 {
			t.Fatalf("%s: warming %s: %+v", what, holder.name, s)
		}
		longer := append(append([]int(nil), cached...), prompt(seed+1, 2)...)
		// Serving the request locally would cache the prefix here too, so
		// wait for the decision (explain serves nothing), then send once.
		waitUntil(t, 20*time.Second, what, func() bool { return explain(via, longer) == holder.name })
		if s := record(send(c, via, "", longer)); s.status != 200 || s.dc != holder.name {
			t.Fatalf("%s: explained to go to %s, served %+v", what, holder.name, s)
		}
	}
	forwardedTo("b's prefix drawing a's request", aGW, b, 100)
	forwardedTo("a's prefix drawing b's request", bGW, a, 200)

	// Session traffic through both gateways, in the background.
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
				gw := []string{aGW, bGW}[(ci+i)%2]
				record(send(c, gw, fmt.Sprintf("s-%d", (ci*31+i)%40), prompt(1000+i%40, 4)))
			}
		})
	}

	time.Sleep(phase(2 * time.Second))
	t.Log("cutting the WAN")
	for _, p := range wan {
		p.Cut()
	}
	for i, gw := range []string{aGW, bGW} { // each DC serves its own traffic
		for k := range 5 {
			if s := record(send(c, gw, "", prompt(3000+10*i+k, 4))); s.status != 200 {
				t.Fatalf("during the cut, %s refused local traffic: %+v", gw, s)
			}
		}
	}
	cachedInB := prompt(4000, 48)
	if s := record(send(c, bGW, "", cachedInB)); s.status != 200 || s.dc != "dcb" {
		t.Fatalf("during the cut, b served %+v", s)
	}
	time.Sleep(phase(2 * time.Second))
	t.Log("restoring the WAN")
	for _, p := range wan {
		p.Restore()
	}
	longer := append(append([]int(nil), cachedInB...), prompt(4001, 2)...)
	waitUntil(t, 20*time.Second, "summaries to reconverge after the cut", func() bool { return explain(aGW, longer) == "dcb" })
	if s := record(send(c, aGW, "", longer)); s.status != 200 || s.dc != "dcb" {
		t.Fatalf("after the cut, a's request for b's prefix was served %+v", s)
	}

	t.Log("killing a's relay")
	ra.kill()
	time.Sleep(phase(time.Second))
	ra.start(t)
	forwardedTo("b's prefix drawing a's request after a's relay restarted", aGW, b, 5000)
	forwardedTo("a's prefix drawing b's request after a's relay restarted", bGW, a, 6000)
	close(stop)
	wg.Wait()

	// No session was served by two DCs, nor by two engines.
	where := map[string]map[string]bool{}
	okCount, sessionsOK := 0, 0
	for _, s := range history {
		if s.session == "" || s.status != 200 {
			continue
		}
		sessionsOK++
		if where[s.session] == nil {
			where[s.session] = map[string]bool{}
		}
		where[s.session][s.dc+" "+s.engine] = true
	}
	for _, s := range history {
		if s.status == 200 {
			okCount++
		}
	}
	t.Logf("%d requests, %d served; %d session requests served over %d sessions", len(history), okCount, sessionsOK, len(where))
	if len(where) < 20 {
		t.Fatalf("only %d sessions were served", len(where))
	}
	for s, at := range where {
		if len(at) > 1 {
			t.Fatalf("session %s served by %v", s, at)
		}
	}
}

// mustProxy starts a WAN link proxy to target, closed at cleanup.
func mustProxy(t *testing.T, target string, delay time.Duration) *netem.Proxy {
	t.Helper()
	p, err := netem.Listen(target, delay)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
