package frontend

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

func TestNormaliseUpstreamError(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		message string
		typ     string
		code    string
	}{
		{name: "vllm flat", status: 400, body: `{"object":"error","message":"too long","type":"BadRequestError","param":null,"code":400}`, message: "too long", typ: "BadRequestError", code: "400"},
		{name: "openai shape", status: 429, body: `{"error":{"message":"slow down","type":"rate_limit_error","code":"rate"}}`, message: "slow down", typ: "rate_limit_error", code: "rate"},
		{name: "fastapi detail", status: 422, body: `{"detail":[{"loc":["body"],"msg":"bad"}]}`, message: `[{"loc":["body"],"msg":"bad"}]`, typ: "invalid_request_error"},
		{name: "plain text", status: 500, body: "boom\n", message: "boom", typ: "server_error"},
		{name: "empty", status: 503, body: "", message: "engine returned 503 Service Unavailable", typ: "server_error"},
		{name: "error string", status: 500, body: `{"error":"bad"}`, message: "bad", typ: "server_error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var env oaiedge.ErrorBody
			if err := json.Unmarshal(normaliseUpstreamError(tc.status, []byte(tc.body)), &env); err != nil {
				t.Fatal(err)
			}
			e := env.Error
			code := ""
			if e.Code != nil {
				code = *e.Code
			}
			if e.Message != tc.message || e.Type != tc.typ || code != tc.code {
				t.Fatalf("got %+v (code %q)", e, code)
			}
		})
	}
}

func TestEngineErrorStatusPassedOn(t *testing.T) {
	ts, r, _ := setup(t, Config{}, func(e *fakeEngine) {
		e.status, e.errBody = 400, `{"object":"error","message":"context too long","type":"BadRequestError","code":400}`
	})
	resp := post(t, ts, "/v1/completions", `{"model":"m","prompt":"x"}`, nil)
	if resp.StatusCode != 400 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	decodeError(t, resp)
	if _, errs := r.waitDone(t, ts); len(errs) != 1 || !errors.Is(errs[0], ErrUpstream) {
		t.Fatalf("Done errors %v", errs)
	}
}

// TestEngineRequestHeaders: the engine gets the request id, the body's
// type, the answer type the client asked for (a stream or one JSON
// object), and neither the client's credentials nor the idempotency mark
// the transport reads.
func TestEngineRequestHeaders(t *testing.T) {
	tests := []struct {
		name, body, accept string
	}{
		{"one answer", `{"model":"m","prompt":"x"}`, "application/json"},
		{"stream", `{"model":"m","prompt":"x","stream":true}`, "text/event-stream"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, _, e := setup(t, Config{}, nil)
			resp := post(t, ts, "/v1/completions", tc.body, map[string]string{"Authorization": "Bearer client-key", "X-Request-Id": "rid-7"})
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			h := e.headers[0]
			if h.Get("Accept") != tc.accept || h.Get("Content-Type") != "application/json" || h.Get("X-Request-Id") != "rid-7" {
				t.Fatalf("engine request headers %v", h)
			}
			if _, ok := h["Authorization"]; ok {
				t.Fatalf("client credentials reached the engine: %v", h)
			}
			if _, ok := h["Idempotency-Key"]; ok {
				t.Fatalf("idempotency mark sent: %v", h)
			}
		})
	}
}

// TestEngineAPIKey: with EngineAPIKey set, every engine request carries it
// as a bearer token in place of the client's own credentials; an engine
// that refuses the router's credentials costs the client a 502 that names
// them, not a 401 that would blame the client's key.
func TestEngineAPIKey(t *testing.T) {
	engineWants := func(e *fakeEngine) { e.apiKey = "engine-key" }
	clientAuth := map[string]string{"Authorization": "Bearer client-key"}
	t.Run("key set", func(t *testing.T) {
		ts, _, e := setup(t, Config{EngineAPIKey: "engine-key"}, engineWants)
		resp := post(t, ts, "/v1/completions", `{"model":"m","prompt":"x"}`, clientAuth)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		_ = resp.Body.Close()
		e.mu.Lock()
		defer e.mu.Unlock()
		if len(e.auths) != 1 || e.auths[0] != "Bearer engine-key" {
			t.Fatalf("engine saw Authorization %q", e.auths)
		}
	})
	t.Run("key missing", func(t *testing.T) {
		ts, r, e := setup(t, Config{}, engineWants)
		resp := post(t, ts, "/v1/completions", `{"model":"m","prompt":"x"}`, clientAuth)
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("status %d, want 502", resp.StatusCode)
		}
		var env struct{ Error struct{ Message string } }
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || !strings.Contains(env.Error.Message, "credentials") {
			t.Fatalf("error body %+v (%v)", env, err)
		}
		_ = resp.Body.Close()
		if _, errs := r.waitDone(t, ts); len(errs) != 1 || !errors.Is(errs[0], ErrUpstream) {
			t.Fatalf("Done errors %v", errs)
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if len(e.auths) != 1 || e.auths[0] != "" {
			t.Fatalf("client credentials reached the engine: %q", e.auths)
		}
	})
	t.Run("invalid key", func(t *testing.T) {
		for _, k := range []string{"two words", "line\nbreak", "tab\t"} {
			if err := (Config{EngineAPIKey: k}).withDefaults().Validate(); !errors.Is(err, ErrConfig) || strings.Contains(err.Error(), k) {
				t.Fatalf("key %q: %v", k, err)
			}
		}
	})
}

// TestHTTPSEngineVerifiedAgainstEngineRootCAs: an engine served over
// https is reached when its certificate chains to EngineRootCAs, and
// refused (502) when it does not.
func TestHTTPSEngineVerifiedAgainstEngineRootCAs(t *testing.T) {
	e := newFakeEngine(t, func(e *fakeEngine) { e.https = true })
	trusted := x509.NewCertPool()
	trusted.AddCert(e.Certificate())
	for _, tc := range []struct {
		name   string
		roots  *x509.CertPool
		status int
	}{
		{"trusted", trusted, 200},
		{"system roots", nil, http.StatusBadGateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startFrontend(t, Config{EngineRootCAs: tc.roots}, newFakeRouter(e.URL, "m"))
			resp := post(t, ts, "/v1/completions", `{"model":"m","prompt":"x"}`, nil)
			_ = resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
}

// A request whose engine cannot be reached is routed a second time; when
// that engine cannot be reached either, the client gets 502.
func TestEngineUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	r := newFakeRouter(dead, "m")
	ts := startFrontend(t, Config{}, r)
	for _, body := range []string{`{"model":"m","prompt":"x"}`, `{"model":"m","prompt":"x","stream":true}`} {
		resp := post(t, ts, "/v1/completions", body, nil)
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if _, code := decodeError(t, resp); code != "upstream_error" {
			t.Fatalf("code %q", code)
		}
		// The first decision learns that its engine was unreachable, and
		// the request is routed once more; the second failure is the
		// client's 502.
		if _, errs := r.waitDone(t, ts); len(errs) != 2 || !errors.Is(errs[0], dispatch.ErrEngineUnreachable) || !errors.Is(errs[1], ErrUpstream) {
			t.Fatalf("Done errors %v", errs)
		}
		<-r.doneCh // the second decision's Done, of the same request
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.reqs); n != 4 {
		t.Fatalf("%d Route calls for 2 requests, want 2 each", n)
	}
	if code := get(t, ts, "/health"); code != 200 {
		t.Fatalf("health %d", code)
	}
}

func TestGracefulShutdownFinishesStream(t *testing.T) {
	e := newFakeEngine(t, func(e *fakeEngine) { e.delay = 30 * time.Millisecond })
	r := newFakeRouter(e.URL, "m")
	s, err := New(Config{}, r, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, ln) }()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	ts := &testServer{URL: "http://" + ln.Addr().String(), srv: s, client: &http.Client{Transport: tr}}
	resp := streamRequest(t, context.Background(), ts, streamBody)
	cancel() // drain while the stream is in flight
	waittest.Until(t, 10*time.Second, "the server is draining", s.draining.Load)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ready", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("ready while draining: %d", rec.Code)
	}
	data := make([]byte, 0, 4096)
	buf := make([]byte, 512)
	for {
		n, err := resp.Body.Read(buf)
		data = append(data, buf[:n]...)
		if err != nil {
			break
		}
	}
	resp.Body.Close()
	if len(data) == 0 || string(data[len(data)-14:]) != "data: [DONE]\n\n" {
		t.Fatalf("stream not finished during drain: %q", data)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// TestStreamCutMidEventIsNotRelayed checks that an engine stream ending in
// the middle of an event reaches the client as its complete events and an
// error event, never as the partial event's bytes, which would run into
// the error event and break the client's framing.
func TestStreamCutMidEventIsNotRelayed(t *testing.T) {
	ts, _, _ := setup(t, Config{}, func(e *fakeEngine) { e.cut = true })
	resp := post(t, ts, "/v1/completions", `{"model":"m","prompt":"x","stream":true}`, nil)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var events, errorsSeen int
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			if line != "" {
				t.Fatalf("stray line %q in %q", line, body)
			}
			continue
		}
		var v struct {
			Error *struct{ Code string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			t.Fatalf("event %q is not JSON: %v (stream %q)", data, err, body)
		}
		events++
		if v.Error != nil {
			errorsSeen++
		}
	}
	if events != 2 || errorsSeen != 1 {
		t.Fatalf("%d events, %d errors, want the first token and one error event: %q", events, errorsSeen, body)
	}
}

// TestEngineClosedConnectionsReplayed checks that an engine that closes
// the node's kept-alive connections (a restart, its keep-alive timeout)
// costs no client an error: a request caught on such a connection, while
// writing a long body or waiting for the answer, is sent again on a new
// one.
func TestEngineClosedConnectionsReplayed(t *testing.T) {
	ts, r, e := setup(t, Config{}, nil)
	body := `{"model":"m","prompt":"` + strings.Repeat("x", 200_000) + `"}`
	for i := range 20 {
		resp := post(t, ts, "/v1/completions", body, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
		if _, errs := r.waitDone(t, ts); len(errs) != 1 || errs[0] != nil {
			t.Fatalf("request %d: Done errors %v", i, errs)
		}
		e.CloseClientConnections()
	}
}

// failingWrites is a transport whose first n requests fail as a write on
// a connection the engine closed (broken pipe) fails; the rest go to the
// engine.
type failingWrites struct {
	mu    sync.Mutex
	n     int
	inner http.RoundTripper
}

func (f *failingWrites) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}
	}
	return f.inner.RoundTrip(r)
}

// A request whose write fails is sent once more on the same decision; when
// that write fails too (a dead engine leaves many kept-alive connections
// in the pool), it is routed again, as an unreachable engine's is; a
// rerouted request whose writes fail gets 502.
func TestEngineWriteFailures(t *testing.T) {
	e := newFakeEngine(t, nil)
	for _, tc := range []struct {
		fails  int
		status int
		routes int
		done   []error // the errors each decision's Done got, in order
	}{
		{1, http.StatusOK, 1, []error{nil}},
		{2, http.StatusOK, 2, []error{dispatch.ErrEngineUnreachable, nil}},
		{4, http.StatusBadGateway, 2, []error{dispatch.ErrEngineUnreachable, ErrUpstream}},
	} {
		t.Run(strconv.Itoa(tc.fails), func(t *testing.T) {
			r := newFakeRouter(e.URL, "m")
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			ts := startFrontend(t, Config{Transport: &failingWrites{n: tc.fails, inner: tr}}, r)
			resp := post(t, ts, "/v1/completions", `{"model":"m","prompt":"x"}`, nil)
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			// Every decision's Done has run once the handler returned.
			if _, errs := r.waitDone(t, ts); len(errs) != len(tc.done) {
				t.Fatalf("Done errors %v, want %v", errs, tc.done)
			} else {
				for i, want := range tc.done {
					if (want == nil) != (errs[i] == nil) || (want != nil && !errors.Is(errs[i], want)) {
						t.Fatalf("Done errors %v, want %v", errs, tc.done)
					}
				}
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.reqs) != tc.routes {
				t.Fatalf("%d Route calls, want %d", len(r.reqs), tc.routes)
			}
		})
	}
}
