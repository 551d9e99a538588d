package frontend

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/waittest"
)

// TestBodyBudget holds part of the node's body budget with a body that
// is still arriving: a request whose body does not fit the rest is
// refused with 503, Retry-After and the OpenAI error body before it is
// read, the refusal is counted, and once the first body is let go the
// same request is served.
func TestBodyBudget(t *testing.T) {
	ts, _, _ := setup(t, Config{MaxBodyBytes: 1024, Edge: EdgeConfig{MaxBufferedBodyBytes: 1400}}, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	waittest.Until(t, 10*time.Second, "the body budget holds the request's 1000 bytes", func() bool { return ts.srv.bodies.Budget.Held() == 1000 })

	body := `{"model":"m","prompt":"` + strings.Repeat("a", 500) + `"}`
	resp := post(t, ts, "/v1/completions", body, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if _, code := decodeError(t, resp); code != "server_overloaded" {
		t.Fatalf("code %q", code)
	}
	if n := metricValue(t, ts, "kvrouter_edge_body_budget_refusals_total"); n != 1 {
		t.Fatalf("refusals counted: %v", n)
	}

	conn.Close()
	waittest.Until(t, 10*time.Second, "the body budget is given back", func() bool { return ts.srv.bodies.Budget.Held() == 0 })
	body = `{"model":"m","prompt":[1,2,3]}` + strings.Repeat(" ", 500)
	if resp := post(t, ts, "/v1/completions", body, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the release: status %d", resp.StatusCode)
	}
	waittest.Until(t, 10*time.Second, "the body budget is given back", func() bool { return ts.srv.bodies.Budget.Held() == 0 })
}

// metricValue reads an unlabelled family's value from the server's
// registry.
func metricValue(t *testing.T, ts *testServer, name string) float64 {
	t.Helper()
	mfs, err := ts.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no family %s", name)
	return 0
}
