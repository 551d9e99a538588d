package server

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/kvrouter/kvrouter/internal/oaiedge/oaiedgetest"
	"github.com/kvrouter/kvrouter/mocker"
)

const (
	testModel = "test-model"
	testDC    = "dc1"
	testBlock = 16
)

// harness is a running mocker on an embedded NATS server and a loopback
// listener, plus an observer connection for assertions.
type harness struct {
	t      testing.TB
	srv    *Server
	obs    *nats.Conn
	base   string
	cancel context.CancelFunc
	done   chan error
}

// testConfig is a small, fast engine: iterations take about 75 µs.
func testConfig() Config {
	return Config{
		EngineID: 42, DC: testDC, DPSize: 1,
		HeartbeatInterval: 20 * time.Millisecond, CardInterval: 50 * time.Millisecond,
		Engine: mocker.Config{Model: testModel, BlockSize: testBlock, NumBlocks: 64, SpeedUp: 100},
		Rand:   rand.New(rand.NewPCG(1, 2)),
	}
}

// startHarness starts NATS and a mocker; subscribe runs on the observer
// connection before the mocker starts, so no message is missed. The leak
// check is registered first, so it runs after every other cleanup.
func startHarness(t testing.TB, mutate func(*Config), subscribe func(*nats.Conn)) *harness {
	t.Helper()
	checkLeaks(t)
	return startEngine(t, mutate, subscribe)
}

// checkLeaks registers the leak check, to run after every cleanup
// registered after it.
func checkLeaks(t testing.TB) {
	// The vLLM-mode tests leave zmq4's idle writers behind (zmqPubWriter);
	// with -count above 1 they are still there when these tests run again.
	opts := []goleak.Option{goleak.IgnoreAnyFunction(zmqPubWriter)}
	if _, bench := t.(*testing.B); bench {
		opts = append(opts, goleak.IgnoreCurrent()) // the benchmark runner
	}
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
}

// startEngine is startHarness without the leak check, for tests that run
// several engines under one check.
func startEngine(t testing.TB, mutate func(*Config), subscribe func(*nats.Conn)) *harness {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats not ready")
	}
	nc := connect(t, ns.ClientURL())
	obs := connect(t, ns.ClientURL())
	if subscribe != nil {
		subscribe(obs)
		if err := obs.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg, nc, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, srv: srv, obs: obs, base: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { h.stop() })
	// The HTTP listener is served only once the engine is open on NATS.
	if status, body := h.get("/health"); status != http.StatusOK {
		t.Fatalf("health %d %s", status, body)
	}
	return h
}

func connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// stop shuts the mocker down once and returns Serve's error.
func (h *harness) stop() error {
	h.cancel()
	select {
	case err, ok := <-h.done:
		if ok {
			close(h.done)
		}
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("Serve did not return")
		return nil
	}
}

// client is an OpenAI wire client of the mocker's loopback endpoint.
func (h *harness) client() *oaiedgetest.Client {
	return &oaiedgetest.Client{Base: h.base}
}

// chat is a chat request body with one user message.
func chat(content string, maxTokens int, stream bool) map[string]any {
	body := map[string]any{"model": testModel, "max_tokens": maxTokens,
		"messages": []map[string]any{{"role": "user", "content": content}}}
	if stream {
		body["stream"] = true
	}
	return body
}

// post sends a raw JSON body and returns the status and body.
func (h *harness) post(path, body string, header map[string]string) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.base+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return h.do(req)
}

func (h *harness) get(path string) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.base+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.do(req)
}

func (h *harness) do(req *http.Request) (int, string) {
	h.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}

// next waits for the next message of a synchronous subscription.
func next(t testing.TB, sub *nats.Subscription) *nats.Msg {
	t.Helper()
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("waiting on %s: %v", sub.Subject, err)
	}
	return m
}

func subscribe(t testing.TB, nc *nats.Conn, subject string) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// expectedText is the filler output of n tokens.
func expectedText(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(Word(i))
	}
	return b.String()
}

// tokenRange returns n distinct token ids starting at from.
func tokenRange(from, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(from + i)
	}
	return out
}
