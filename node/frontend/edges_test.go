package frontend

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/mocker"
	mockserver "github.com/kvrouter/kvrouter/mocker/server"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const (
	clientKey     = "client-key-0123456789abcdef"
	operatorToken = "operator-token-0123456789abcdef"
)

// do sends one request and returns the status and body.
func do(t *testing.T, c *http.Client, method, url, auth, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAccessControl checks who may call what, with client keys and an
// operator token configured, and that every refusal is counted.
func TestAccessControl(t *testing.T) {
	cfg := Config{Edge: EdgeConfig{AccessConfig: oaiedge.AccessConfig{APIKeys: []string{clientKey}, OperatorTokens: []string{operatorToken}}}}
	ts, _, _ := setup(t, cfg, nil)
	compl := `{"model":"m","prompt":"hello"}`
	tests := []struct {
		name, method, path, auth, body string
		status                         int
	}{
		{"api without a key", "POST", "/v1/completions", "", compl, 401},
		{"api with a wrong key", "POST", "/v1/completions", "wrong-key-0123456789abcdef", compl, 401},
		{"api with the key", "POST", "/v1/completions", clientKey, compl, 200},
		{"api with the operator token", "POST", "/v1/models", operatorToken, "", 405},
		{"models with the key", "GET", "/v1/models", clientKey, "", 200},
		{"delete without credentials", "DELETE", "/v1/sessions/s1", "", "", 401},
		{"delete with a client key", "DELETE", "/v1/sessions/s1", clientKey, "", 403},
		{"delete with the operator token", "DELETE", "/v1/sessions/s1", operatorToken, "", 204},
		{"session read without credentials", "GET", "/v1/sessions/s1", "", "", 401},
		{"metrics without credentials", "GET", "/metrics", "", "", 401},
		{"explain with a client key", "POST", "/v1/route/explain", clientKey, compl, 403},
		{"health stays open", "GET", "/health", "", "", 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := do(t, ts.client, tc.method, ts.URL+tc.path, tc.auth, tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if status == 401 && !strings.Contains(body, `"type":"authentication_error"`) {
				t.Fatalf("401 without the OpenAI error body: %s", body)
			}
		})
	}
	refused := ts.srv.EdgeMetrics().AuthRefusals
	if got := testutil.ToFloat64(refused.WithLabelValues("admin", oaiedge.ReasonMissing)); got != 3 {
		t.Fatalf("admin refusals for a missing credential: %v, want 3", got)
	}
	if got := testutil.ToFloat64(refused.WithLabelValues("api", oaiedge.ReasonInvalid)); got != 1 {
		t.Fatalf("api refusals for a wrong key: %v, want 1", got)
	}
}

// TestAdminClosedOffLoopback checks that with no operator credential the
// admin routes answer on a loopback listener only: a request reaching
// the node through a listener on another address is refused.
func TestAdminClosedOffLoopback(t *testing.T) {
	s, err := New(Config{}, newFakeRouter("http://127.0.0.1:1", "m"), metrics.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, local string
		status      int
	}{
		{"loopback listener", "127.0.0.1:8000", 204},
		{"routable listener", "10.1.2.3:8000", 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("DELETE", "/v1/sessions/s1", nil)
			ln := fakeListener{addr: mustTCP(t, tc.local)}
			req = req.WithContext(oaiedge.ConnContext(ln)(req.Context(), nil))
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, req)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
		})
	}
}

// TestCredentialsStayOutOfLogsAndMetrics sends requests carrying keys,
// right and wrong, through a debug-level logger and checks that no key
// appears in the logs or on /metrics.
func TestCredentialsStayOutOfLogsAndMetrics(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newFakeEngine(t, nil)
	m := metrics.New()
	cfg := Config{Edge: EdgeConfig{AccessConfig: oaiedge.AccessConfig{APIKeys: []string{clientKey}, OperatorTokens: []string{operatorToken}}}}
	s, err := New(cfg, newFakeRouter(e.URL, "m"), m, log)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	wrong := "wrong-secret-0123456789abcdef"
	for _, auth := range []string{clientKey, wrong, operatorToken} {
		do(t, ts.Client(), "POST", ts.URL+"/v1/completions", auth, `{"model":"m","prompt":"hello"}`)
		do(t, ts.Client(), "DELETE", ts.URL+"/v1/sessions/s1", auth, "")
	}
	_, page := do(t, ts.Client(), "GET", ts.URL+"/metrics", operatorToken, "")
	for _, secret := range []string{clientKey, wrong, operatorToken} {
		if strings.Contains(logs.String(), secret) || strings.Contains(page, secret) {
			t.Fatalf("a credential leaked into the logs or metrics")
		}
	}
	if !strings.Contains(logs.String(), "routed") {
		t.Fatal("the debug log captured nothing: the check proves nothing")
	}
}

// TestPassThroughRoutes sends each pass-through endpoint through the
// frontend to a mocker and checks the answer and what was routed.
func TestPassThroughRoutes(t *testing.T) {
	ms, err := mockserver.New(mockserver.Config{EngineID: 1, Engine: mocker.Config{Model: "m", BlockSize: 4, NumBlocks: 64}}, natsConn(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	engine := httptest.NewServer(ms.Handler())
	defer engine.Close()
	r := newFakeRouter(engine.URL, "m")
	ts := startFrontend(t, Config{}, r)
	tests := []struct {
		name, method, path, body, want string
		status                         int
		text                           string
		session                        string
	}{
		{name: "embeddings", method: "POST", path: "/v1/embeddings", body: `{"model":"m","input":"abcdefgh","user":"u1"}`,
			status: 200, want: `"object":"embedding"`, text: "abcdefgh", session: "u1"},
		{name: "responses", method: "POST", path: "/v1/responses", body: `{"model":"m","input":"hi","instructions":"be brief","prompt_cache_key":"k1","user":"u1"}`,
			status: 200, want: `"object":"response"`, text: "system\nbe brief\nuser\nhi\n", session: "k1"},
		{name: "tokenize", method: "POST", path: "/tokenize", body: `{"model":"m","prompt":"abcd"}`, status: 200, want: `"count":1`},
		{name: "detokenize", method: "POST", path: "/detokenize", body: `{"model":"m","tokens":[1684234849]}`, status: 200, want: `"prompt":"abcd"`},
		{name: "model", method: "GET", path: "/v1/models/m", status: 200, want: `"id":"m"`},
		{name: "unknown model", method: "GET", path: "/v1/models/nope", status: 404, want: `"code":"model_not_found"`},
		{name: "embeddings of invalid UTF-8", method: "POST", path: "/v1/embeddings", body: "{\"model\":\"m\",\"input\":\"a\xff\"}",
			status: 400, want: `"param":"input"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := do(t, ts.client, tc.method, ts.URL+tc.path, "", tc.body)
			if status != tc.status || !strings.Contains(body, tc.want) {
				t.Fatalf("status %d body %s, want %d with %s", status, body, tc.status, tc.want)
			}
			if tc.text == "" && tc.session == "" {
				return
			}
			req := r.lastRequest(t)
			if req.Text != tc.text || req.SessionID != tc.session {
				t.Fatalf("routed text %q session %q, want %q %q", req.Text, req.SessionID, tc.text, tc.session)
			}
		})
	}
}

// packagePrefix matches an error message that starts a segment with the
// name of one of the repository's packages and a colon.
var packagePrefix = regexp.MustCompile(`(^|: )(dispatch|frontend|gateway|oaiedge|policy|routing|consensus|store|fleet|node|relay|tokenize|mocker|metrics|mtls): `)

// TestErrorBodiesNameNoPackage drives every error path it can reach and
// checks that no client-facing message carries a Go package prefix.
func TestErrorBodiesNameNoPackage(t *testing.T) {
	cfg := Config{MaxPromptTokens: 8, MaxBodyBytes: 1024,
		Edge: EdgeConfig{AccessConfig: oaiedge.AccessConfig{APIKeys: []string{clientKey}}}}
	ts, r, _ := setup(t, cfg, nil)
	bodies := []struct{ path, auth, body string }{
		{"/v1/completions", "", `{}`},
		{"/v1/completions", clientKey, `{"model":"nope","prompt":"x"}`},
		{"/v1/completions", clientKey, `{"model":"m","prompt":"` + strings.Repeat("x", 100) + `"}`},
		{"/v1/completions", clientKey, `{"model":"m"`},
		{"/v1/chat/completions", clientKey, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\"}]}"},
		{"/v1/completions", clientKey, strings.Repeat("x", 2000)},
		{"/v1/nothing", clientKey, `{}`},
		{"/v1/embeddings", clientKey, `{"model":"m"}`},
	}
	for _, b := range bodies {
		_, body := do(t, ts.client, "POST", ts.URL+b.path, b.auth, b.body)
		checkNoPackage(t, body)
	}
	for _, err := range []error{errFake("dispatch: no engine available"), errFake("dispatch: all engines overloaded")} {
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		_, body := do(t, ts.client, "POST", ts.URL+"/v1/completions", clientKey, `{"model":"m","prompt":"x"}`)
		checkNoPackage(t, body)
	}
}

func checkNoPackage(t *testing.T, body string) {
	t.Helper()
	var e oaiedge.ErrorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Message == "" {
		t.Fatalf("not an OpenAI error body: %s", body)
	}
	if packagePrefix.MatchString(e.Error.Message) {
		t.Fatalf("message %q names a Go package", e.Error.Message)
	}
}

type errFake string

func (e errFake) Error() string { return string(e) }

// fakeListener is a listener that only has an address, for ConnContext.
type fakeListener struct{ addr net.Addr }

func (l fakeListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (l fakeListener) Close() error              { return nil }
func (l fakeListener) Addr() net.Addr            { return l.addr }

func mustTCP(t *testing.T, s string) *net.TCPAddr {
	t.Helper()
	a, err := net.ResolveTCPAddr("tcp", s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// natsConn is a connection to an embedded NATS server that lives as long
// as the test: the mocker needs one to be built, though these tests use
// only its HTTP handler.
func natsConn(t *testing.T) *nats.Conn {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats server not ready")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close(); ns.Shutdown(); ns.WaitForShutdown() })
	return nc
}
