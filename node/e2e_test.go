package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/kvrouter/kvrouter/fleet/natsbus"
	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/mtls/mtlstest"
	"github.com/kvrouter/kvrouter/internal/netem"
	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/mocker/server"
	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/routing"
)

const model = mocker.DefaultModel

// fleet is a node and its engines on loopback, all in this process.
type fleet struct {
	t       *testing.T
	node    *node.Node
	engines map[uint64]*server.Server
	stops   map[uint64]context.CancelFunc
	ctx     context.Context
	wg      sync.WaitGroup
	base    string
}

func startFleet(t *testing.T, engines int, tweak func(*node.Config)) *fleet {
	t.Helper()
	return startFleetIgnoring(t, engines, tweak)
}

// startFleetIgnoring is startFleet with goroutines the leak check ignores
// besides those running before the fleet starts.
func startFleetIgnoring(t *testing.T, engines int, tweak func(*node.Config), ignore ...goleak.Option) *fleet {
	t.Helper()
	ignore = append(ignore, goleak.IgnoreCurrent())
	t.Cleanup(func() { goleak.VerifyNone(t, ignore...) })
	cfg := node.DefaultConfig()
	cfg.HTTPAddr, cfg.NATSListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Events.LivenessTimeout = time.Second
	if tweak != nil {
		tweak(&cfg)
	}
	log := testLogger()
	n, err := node.New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &fleet{t: t, node: n, ctx: ctx, engines: map[uint64]*server.Server{}, stops: map[uint64]context.CancelFunc{}}
	t.Cleanup(func() { cancel(); f.wg.Wait() })
	f.wg.Go(func() {
		if err := n.Run(ctx); err != nil {
			t.Errorf("node: %v", err)
		}
	})
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	f.base = "http://" + n.Addr().String()
	for i := range engines {
		f.startEngine(uint64(i + 1))
	}
	if engines > 0 {
		f.waitEngines(engines)
	}
	return f
}

func (f *fleet) startEngine(id uint64) { f.serveEngine(id, f.listen(), "") }

// startEngineBehindProxy starts engine id advertising a proxy's address as
// its endpoint; closing the proxy makes the engine unreachable to the node
// while it stays registered, as a killed engine's process does until the
// liveness timeout.
func (f *fleet) startEngineBehindProxy(id uint64) *netem.Proxy {
	f.t.Helper()
	ln := f.listen()
	px, err := netem.Listen(ln.Addr().String(), 0)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(px.Close)
	f.serveEngine(id, ln, "http://"+px.Addr())
	return px
}

func (f *fleet) listen() net.Listener {
	f.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	return ln
}

// serveEngine runs engine id on ln, advertising endpoint ("": ln's).
func (f *fleet) serveEngine(id uint64, ln net.Listener, endpoint string) {
	f.serveEngineWith(id, ln, func(c *server.Config) { c.EndpointURL = endpoint })
}

// serveEngineWith runs engine id on ln, its configuration adjusted by
// edit.
func (f *fleet) serveEngineWith(id uint64, ln net.Listener, edit func(*server.Config)) {
	f.t.Helper()
	log := slog.New(slog.DiscardHandler)
	bus, err := natsbus.Open(natsbus.Config{URL: f.node.NATSURL()}, log)
	if err != nil {
		f.t.Fatal(err)
	}
	cfg := server.Config{EngineID: id, HeartbeatInterval: 100 * time.Millisecond, Engine: mocker.Config{SpeedUp: 100, BlockSize: 16}}
	edit(&cfg)
	srv, err := server.New(cfg, bus.Conn, log)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	f.engines[id], f.stops[id] = srv, cancel
	f.wg.Go(func() {
		defer bus.Close()
		if err := srv.Serve(ctx, ln); err != nil && ctx.Err() == nil {
			f.t.Errorf("engine %d: %v", id, err)
		}
	})
}

func (f *fleet) waitEngines(want int) {
	f.t.Helper()
	waittest.Until(f.t, 10*time.Second, fmt.Sprintf("%d engines registered", want), func() bool { return f.node.Engines() == want })
}

// complete sends a non-streaming completion with token ids and returns the
// engine that served it and the cached tokens it reported.
func (f *fleet) complete(tokens []int) (worker string, cached int64) {
	f.t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": tokens, "max_tokens": 2})
	resp, err := http.Post(f.base+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Usage struct {
			Details struct {
				Cached int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		f.t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		f.t.Fatal(err)
	}
	return resp.Header.Get("X-Kvrouter-Worker"), out.Usage.Details.Cached
}

func seq(start, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = start + i
	}
	return out
}

// A request sharing a long prefix with an earlier one goes to the engine
// that cached it, even while that engine is busy with the earlier request's
// decode; a fresh prompt goes to the idle engine. The engines run at the
// simulated hardware's own speed, so the earlier request's 3000 output
// tokens keep its engine busy for about 20 s, far longer than the test
// takes on any machine.
func TestSharedPrefixLandsOnTheCachingEngine(t *testing.T) {
	f := startFleet(t, 0, nil)
	for id := uint64(1); id <= 2; id++ {
		f.serveEngineWith(id, f.listen(), func(c *server.Config) { c.Engine.SpeedUp = 1 })
	}
	f.waitEngines(2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": seq(1000, 512), "max_tokens": 3000, "stream": true})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.base+"/v1/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := resp.Header.Get("X-Kvrouter-Worker")
	if _, err := resp.Body.Read(make([]byte, 1)); err != nil || first == "" {
		t.Fatalf("first stream: %v, worker %q", err, first)
	}
	// The engine publishes the prompt's blocks once its prefill is done;
	// the next request may only be routed after they reach the index and
	// the node has seen the first token, which ends the prefill's load.
	f.waitCached(seq(1000, 512), first)
	f.waitPrefillsDone()
	shared := append(seq(1000, 480), seq(90000, 64)...)
	again, cached := f.complete(shared)
	if again != first || cached < 480-16 {
		t.Fatalf("shared prefix went to %s (first %s) with %d cached tokens; explain now: %s", again, first, cached, f.explain(shared))
	}
	fresh, cached := f.complete(seq(50000, 512))
	if fresh == first || cached != 0 {
		t.Fatalf("fresh prompt went to %s (busy engine %s) with %d cached tokens", fresh, first, cached)
	}
}

// waitPrefillsDone waits until no engine has prefill load booked: a
// prefill ends when the node sees the first token, or, on a prefill
// engine, when its own response ends, which can come after the client's.
func (f *fleet) waitPrefillsDone() {
	f.t.Helper()
	waittest.Until(f.t, 10*time.Second, "no prefill load is booked", func() bool {
		return metricValue(f.t, f.node, "kvrouter_worker_active_prefill_tokens") == 0
	})
}

// waitEnginesIdle waits until every engine's last heartbeat reports no
// request in flight and no blocks held: the cost of an engine weighs the
// load it reported beyond what the node booked, and a heartbeat sent
// while a finished request was still running can outlast its booking.
func (f *fleet) waitEnginesIdle() {
	f.t.Helper()
	waittest.Until(f.t, 10*time.Second, "every engine reports itself idle", func() bool {
		for _, e := range f.node.EngineRegistry().Engines() {
			for _, l := range e.Loads {
				if l != (routing.Load{}) {
					return false
				}
			}
		}
		return true
	})
}

// waitCached waits until the node's index holds the prompt's full blocks
// on worker w, as its own POST /v1/route/explain reports them. (A count
// of applied events is not that: a stored event that arrives while the
// engine's first snapshot is in flight is covered by the snapshot and
// counted stale, not applied.)
func (f *fleet) waitCached(prompt []int, w string) {
	f.t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt})
	waittest.UntilNil(f.t, 10*time.Second, fmt.Sprintf("the index holds the prompt's blocks on %s", w), func() error {
		resp, err := http.Post(f.base+"/v1/route/explain", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var ex struct {
			Blocks  int `json:"blocks"`
			Engines []struct {
				Engine string `json:"engine"`
				Cached int    `json:"cached_blocks"`
			} `json:"engines"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&ex); err != nil {
			return err
		}
		for _, e := range ex.Engines {
			if e.Engine == w && e.Cached >= ex.Blocks && ex.Blocks > 0 {
				return nil
			}
		}
		return fmt.Errorf("explain: %+v", ex)
	})
}

// explain is the node's POST /v1/route/explain answer for a prompt of
// token ids, for failure messages.
func (f *fleet) explain(prompt []int) string {
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt})
	resp, err := http.Post(f.base+"/v1/route/explain", "application/json", bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// waitStored waits until the node applied n stored events.
func (f *fleet) waitStored(n float64) {
	f.t.Helper()
	waittest.Until(f.t, 10*time.Second, fmt.Sprintf("%v stored events applied", n), func() bool { return f.stored() >= n })
}

func (f *fleet) stored() float64 {
	return testutil.ToFloat64(f.node.Metrics().EventsApplied.WithLabelValues("stored", "ok"))
}

func (f *fleet) resyncs() float64 {
	return testutil.ToFloat64(f.node.Metrics().Resyncs.WithLabelValues("ok"))
}

func (f *fleet) waitResyncs(n float64) {
	f.t.Helper()
	waittest.Until(f.t, 10*time.Second, fmt.Sprintf("%v resyncs", n), func() bool { return f.resyncs() >= n })
}

// waitHeartbeats waits until the node has recorded n heartbeats of engine
// id (n changes of its last-seen time) from now on.
func (f *fleet) waitHeartbeats(id uint64, n int) {
	f.t.Helper()
	seen := func() time.Time {
		e, _ := f.node.EngineRegistry().Engine(routing.WorkerID(id))
		return e.LastSeen
	}
	last, beats := seen(), 0
	waittest.Until(f.t, 10*time.Second, fmt.Sprintf("%d heartbeats of engine %d recorded", n, id), func() bool {
		if s := seen(); !s.Equal(last) {
			last, beats = s, beats+1
		}
		return beats >= n
	})
}

func TestForcedGapResyncsOnce(t *testing.T) {
	f := startFleet(t, 1, nil)
	f.waitResyncs(1) // the snapshot every newly registered rank gets
	if err := f.engines[1].DropBatches(0, 1); err != nil {
		t.Fatal(err)
	}
	f.complete(seq(1, 256))    // its stored event is dropped: a gap
	f.complete(seq(5000, 256)) // the next batch reveals the gap
	f.waitResyncs(2)
	// The window of "once": what could reveal the gap again has been
	// applied. Batches are applied in order, and each heartbeat's tail
	// check (against the heartbeat before it) is queued to the same
	// applier as it is recorded; three recorded heartbeats queue the
	// checks of two, and a batch published after them is applied only
	// after those checks, and after any resync they started (a resyncing
	// rank's events wait for its snapshot).
	f.waitHeartbeats(1, 3)
	before := f.stored()
	f.complete(seq(9000, 256))
	f.waitStored(before + 1)
	if n := f.resyncs(); n != 2 {
		t.Fatalf("%v resyncs after the gap, want exactly 1", n-1)
	}
	// After the resync the index knows the dropped blocks: the prompt
	// hits on the router's prediction as it does on the engine.
	_, cached := f.complete(seq(1, 256))
	if cached < 240 {
		t.Fatalf("engine reports %d cached tokens", cached)
	}
}

// An engine that stops heartbeating (hung, or killed without a goodbye) is
// dropped within the liveness timeout and gets no more traffic.
func TestHungEngineTrafficReroutes(t *testing.T) {
	f := startFleet(t, 2, nil) // liveness timeout 1 s
	f.engines[2].PauseHeartbeats(true)
	// The timeout is 1 s and a sweep; the bound is a failure bound for a
	// loaded machine, where the node also discounts its own stalls
	// (fleet.Plane.sweep).
	waittest.Until(t, 10*time.Second, "the node dropped the hung engine", func() bool { return f.node.Engines() == 1 })
	for i := range 6 {
		if w, _ := f.complete(seq(100*i, 64)); !strings.HasPrefix(w, "1/") {
			t.Fatalf("request %d went to %s", i, w)
		}
	}
}

// An engine that dies without a goodbye stays registered until the
// liveness timeout (here a minute, so that it cannot interfere). The first
// request routed to it in that time, although its prefix is cached there,
// finds the engine unreachable and is routed again at once; the requests
// after it, and a session bound to the dead engine, go straight to the
// other engine. No client sees an error.
func TestUnreachableEngineTrafficReroutes(t *testing.T) {
	f := startFleet(t, 1, func(c *node.Config) {
		c.Events.LivenessTimeout = time.Minute
		c.Dispatch.AffinityTTL = time.Minute
	})
	px := f.startEngineBehindProxy(2)
	f.waitEngines(2)
	prefix := f.promptServedBy("2/")
	sessionWorker := func() string {
		body, _ := json.Marshal(map[string]any{"model": model, "prompt": prefix, "max_tokens": 2})
		req, _ := http.NewRequest(http.MethodPost, f.base+"/v1/completions", bytes.NewReader(body))
		req.Header.Set("X-Session-ID", "conversation")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != 200 {
			t.Fatalf("session request: status %d, %v", resp.StatusCode, err)
		}
		return resp.Header.Get("X-Kvrouter-Worker")
	}
	if w := sessionWorker(); !strings.HasPrefix(w, "2/") {
		t.Fatalf("session bound to %s, want engine 2, which caches its prompt", w)
	}
	f.engines[2].PauseHeartbeats(true)
	px.Close()
	for i := range 4 {
		if w, _ := f.complete(prefix); !strings.HasPrefix(w, "1/") {
			t.Fatalf("request %d after the kill served by %s", i, w)
		}
	}
	for i := range 2 {
		if w := sessionWorker(); !strings.HasPrefix(w, "1/") {
			t.Fatalf("session request %d after the kill served by %s", i, w)
		}
	}
	if n := testutil.ToFloat64(f.node.Metrics().EngineUnreachable); n != 1 {
		t.Fatalf("%v requests found the engine unreachable, want exactly the first", n)
	}
	if n := f.node.Engines(); n != 2 {
		t.Fatalf("%d engines registered: the liveness timeout, not the reroute, moved the traffic", n)
	}
}

// promptServedBy returns a 256-token prompt that the node sent to the
// engine whose rank names start with prefix, and waits until that engine's
// stored event for it has reached the index.
func (f *fleet) promptServedBy(prefix string) []int {
	f.t.Helper()
	for i := range 20 {
		p := seq(10000*(i+1), 256)
		w, _ := f.complete(p)
		f.waitCached(p, w)
		if strings.HasPrefix(w, prefix) {
			return p
		}
	}
	f.t.Fatalf("no prompt of 20 went to %s", prefix)
	return nil
}

func TestBadInputGetsDocumented4xx(t *testing.T) {
	f := startFleet(t, 1, func(c *node.Config) { c.Frontend.MaxBodyBytes = 1 << 16; c.Dispatch.MaxPromptTokens = 1000 })
	huge := fmt.Sprintf(`{"model":%q,"prompt":"%s"}`, model, strings.Repeat("x", 1<<17))
	tests := []struct {
		name, body string
		status     int
	}{
		{"malformed json", `{"model":`, 400},
		{"wrong type", `{"model":5,"prompt":"x"}`, 400},
		{"unknown model", `{"model":"nope","prompt":"x"}`, 404},
		{"oversized body", huge, 413},
		{"over-long prompt", fmt.Sprintf(`{"model":%q,"prompt":%s}`, model, mustJSON(seq(0, 2000))), 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(f.base+"/v1/completions", "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct {
				Error struct{ Message, Type string } `json:"error"`
			}
			if resp.StatusCode != tc.status || json.NewDecoder(resp.Body).Decode(&e) != nil || e.Error.Message == "" {
				t.Fatalf("status %d (want %d), error %+v", resp.StatusCode, tc.status, e)
			}
		})
	}
	if w, _ := f.complete(seq(0, 32)); w == "" {
		t.Fatal("node unhealthy after bad input")
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestWaitReadyReturnsWhenRunFails checks that a node that cannot start
// (its HTTP address is taken) ends WaitReady with Run's error instead of
// leaving it waiting.
func TestWaitReadyReturnsWhenRunFails(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := node.DefaultConfig()
	cfg.HTTPAddr, cfg.NATSListen = taken.Addr().String(), "127.0.0.1:0"
	n, err := node.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); !errors.Is(err, node.ErrStoppedBeforeReady) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("WaitReady: %v, want ErrStoppedBeforeReady carrying the bind error", err)
	}
	if err := <-runErr; err == nil {
		t.Fatal("Run succeeded on a taken address")
	}
}

// TestClientAPIOverHTTPS: with tls_cert and tls_key the node serves its
// OpenAI API over HTTPS (a completion through it works for a client that
// trusts the certificate) and a plaintext request gets no answer from it;
// a key without its certificate, and an engine CA file without a
// certificate, are refused before anything starts.
func TestClientAPIOverHTTPS(t *testing.T) {
	pki := mtlstest.WritePKI(t, t.TempDir())
	f := startFleet(t, 1, func(c *node.Config) { c.TLSCert, c.TLSKey = pki.Cert, pki.Key })
	_, clientTLS, err := mtls.Load("test", pki)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: clientTLS}
	defer tr.CloseIdleConnections()
	base := "https://" + f.node.Addr().String()
	resp, err := (&http.Client{Transport: tr}).Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"`+mocker.DefaultModel+`","prompt":[1,2,3],"max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("completion over HTTPS: status %d", resp.StatusCode)
	}
	if resp, err := http.Get("http://" + f.node.Addr().String() + "/health"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("a plaintext request was served by an HTTPS node")
		}
	}
	cfg := node.DefaultConfig()
	cfg.TLSKey = pki.Key
	if _, err := node.New(cfg, nil); !errors.Is(err, node.ErrConfig) || !strings.Contains(err.Error(), "tls_cert") {
		t.Fatalf("key without certificate: %v", err)
	}
	cfg = node.DefaultConfig()
	cfg.EngineTLSCA = pki.Key // a key, not a certificate
	if _, err := node.New(cfg, nil); !errors.Is(err, node.ErrConfig) || !strings.Contains(err.Error(), "engine_tls_ca") {
		t.Fatalf("engine CA without a certificate: %v", err)
	}
}
