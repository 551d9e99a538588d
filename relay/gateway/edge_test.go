package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

func TestBadInputGetsOpenAI4xx(t *testing.T) {
	node := newFakeNode(t, "n0")
	g := newGateway(t, Config{DC: "dc-a", Nodes: []string{node.srv.URL}, MaxBodyBytes: 1 << 10, MaxPromptTokens: 16})
	long := strings.Repeat("x", oaiedge.MaxSessionIDBytes+1)
	tests := []struct {
		name       string
		path, body string
		hdr        map[string]string
		status     int
		code       string
		param      string
	}{
		{name: "not json", path: "/v1/completions", body: `{"model":`, status: 400, code: "invalid_request"},
		{name: "not an object", path: "/v1/completions", body: `[1,2]`, status: 400, code: "invalid_request"},
		{name: "missing model", path: "/v1/completions", body: `{"prompt":"x"}`, status: 400, code: "invalid_request", param: "model"},
		{name: "model not a string", path: "/v1/completions", body: `{"model":5,"prompt":"x"}`, status: 400, code: "invalid_request", param: "model"},
		{name: "missing prompt", path: "/v1/completions", body: `{"model":"m"}`, status: 400, code: "invalid_request", param: "prompt"},
		{name: "empty prompt", path: "/v1/completions", body: `{"model":"m","prompt":""}`, status: 400, code: "invalid_request", param: "prompt"},
		{name: "negative token", path: "/v1/completions", body: `{"model":"m","prompt":[1,-2]}`, status: 400, code: "invalid_request", param: "prompt"},
		{name: "bad token_ids", path: "/v1/chat/completions", body: `{"model":"m","messages":[{}],"kvrouter":{"token_ids":[4294967296]}}`, status: 400, code: "invalid_request", param: "kvrouter.token_ids"},
		{name: "empty token_ids", path: "/v1/chat/completions", body: `{"model":"m","messages":[{}],"kvrouter":{"token_ids":[]}}`, status: 400, code: "invalid_request", param: "kvrouter.token_ids"},
		{name: "empty messages", path: "/v1/chat/completions", body: `{"model":"m","messages":[]}`, status: 400, code: "invalid_request", param: "messages"},
		{name: "prompt too long", path: "/v1/completions", body: tokensBody("m", 17, false), status: 400, code: "context_length_exceeded", param: "prompt"},
		{name: "body too large", path: "/v1/completions", body: `{"model":"m","prompt":"` + strings.Repeat("x", 2000) + `"}`, status: 413, code: "request_too_large"},
		{name: "session id too long", path: "/v1/completions", body: `{"model":"m","prompt":"x"}`, hdr: map[string]string{"X-Session-Id": long}, status: 400, code: "invalid_request", param: "X-Session-Id"},
		{name: "bad forwarded header", path: "/v1/completions", body: `{"model":"m","prompt":"x"}`, hdr: map[string]string{ForwardedHeader: "a b"}, status: 400, code: "invalid_request", param: ForwardedHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, h, body := postHandler(t, g, tt.path, tt.body, tt.hdr)
			_, typ, code, param := errorBody(t, body)
			if st != tt.status || code != tt.code || typ != "invalid_request_error" || h.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d code %q type %q, want %d %q", st, code, typ, tt.status, tt.code)
			}
			if got := ""; param != nil {
				got = *param
				if got != tt.param {
					t.Fatalf("param %q, want %q", got, tt.param)
				}
			} else if tt.param != "" {
				t.Fatalf("no param, want %q", tt.param)
			}
		})
	}
	if node.count() != 0 {
		t.Fatal("a bad request reached the node")
	}
	if got := settled(g.metrics.Requests.WithLabelValues(DecisionRejected), float64(len(tests))); got != float64(len(tests)) {
		t.Fatalf("rejected = %v, want %d", got, len(tests))
	}
}

func TestRoutesAndMethods(t *testing.T) {
	node := newFakeNode(t, "n0", "m1", "m2")
	other := newFakeNode(t, "n1", "m2", "m3")
	g := newGateway(t, Config{DC: "dc-a", Nodes: []string{node.srv.URL, other.srv.URL}})
	tests := []struct {
		name, method, path string
		status             int
		contains           string
	}{
		{name: "models are the union", method: "GET", path: "/v1/models", status: 200, contains: `"data":[{"id":"m1"`},
		{name: "health", method: "GET", path: "/health", status: 200, contains: "ok"},
		{name: "ready", method: "GET", path: "/ready", status: 200, contains: "ready"},
		{name: "metrics", method: "GET", path: "/metrics", status: 200, contains: "kvrouter_gateway_requests_total"},
		{name: "wrong method", method: "GET", path: "/v1/completions", status: 405, contains: "method_not_allowed"},
		{name: "unknown path", method: "GET", path: "/v2/nothing", status: 404, contains: "not_found"},
		{name: "home of an unbound session", method: "GET", path: "/v1/sessions/abc/home", status: 200, contains: `"bound":false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			g.Handler().ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.contains) {
				t.Fatalf("%s %s: %d %s", tt.method, tt.path, rec.Code, rec.Body.String())
			}
		})
	}
	rec := httptest.NewRecorder()
	g.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/models", nil))
	var l struct{ Data []struct{ ID string } }
	if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil || len(l.Data) != 3 || l.Data[2].ID != "m3" {
		t.Fatalf("models %s", rec.Body.String())
	}
}

func TestReadinessFollowsNodes(t *testing.T) {
	node := newFakeNode(t, "n0")
	g := newGateway(t, Config{DC: "dc-a", Nodes: []string{node.srv.URL}})
	node.ready.Store(false)
	g.nodes.poll(t.Context(), g.client)
	rec := httptest.NewRecorder()
	g.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/ready", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("ready with no ready node: %d", rec.Code)
	}
	// An unready node is still tried when it is the only one.
	if st, _, _ := postHandler(t, g, "/v1/completions", `{"model":"m","prompt":"x"}`, nil); st != http.StatusOK {
		t.Fatalf("status %d", st)
	}
}

func TestServeStopsCleanly(t *testing.T) {
	node := newFakeNode(t, "n0")
	g := newGateway(t, Config{DC: "dc-a", Nodes: []string{node.srv.URL}, HealthInterval: 10 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{DC: "a", Nodes: []string{"http://n"}, Now: time.Now}
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{name: "no clock", edit: func(c *Config) { c.Now = nil }},
		{name: "no dc", edit: func(c *Config) { c.DC = "" }},
		{name: "dc with space", edit: func(c *Config) { c.DC = "a b" }},
		{name: "no nodes", edit: func(c *Config) { c.Nodes = nil }},
		{name: "bad node url", edit: func(c *Config) { c.Nodes = []string{"ftp://x"} }},
		{name: "remote is self", edit: func(c *Config) { c.Remotes = []Remote{{DC: "a", URL: "http://r"}} }},
		{name: "duplicate remote", edit: func(c *Config) { c.Remotes = []Remote{{DC: "b", URL: "http://r"}, {DC: "b", URL: "http://s"}} }},
		{name: "bad pool", edit: func(c *Config) { c.Pools = []Pool{{Model: "m", BlockSize: -1}} }},
		{name: "bad utilization", edit: func(c *Config) { c.Policy.MaxUtilization = 2 }},
		{name: "negative cost", edit: func(c *Config) { c.Policy.PrefillCostPerTokenMs = -1 }},
	}
	if _, err := New(ok); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			if _, err := New(c); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
