package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// TestBodyBudget: with part of the gateway's body budget held, a request
// whose body does not fit the rest is refused with 503, Retry-After and
// the OpenAI error body; once the held part is released the same request
// is served, and its own share is given back when it ends.
func TestBodyBudget(t *testing.T) {
	node := newFakeNode(t, "n0")
	g := newGateway(t, Config{DC: "dc-a", Nodes: []string{node.srv.URL}, MaxBodyBytes: 1 << 10,
		Edge: EdgeConfig{EdgeConfig: oaiedge.EdgeConfig{MaxBufferedBodyBytes: 1400}}})
	_, held, err := g.bodies.ReadHeld(httptest.NewRecorder(),
		httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("x", 1000))), nil)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"m","prompt":"` + strings.Repeat("a", 500) + `"}`
	status, hdr, resp := postHandler(t, g, "/v1/completions", body, nil)
	if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") != oaiedge.BudgetRetryAfter || !strings.Contains(resp, `"code":"server_overloaded"`) {
		t.Fatalf("status %d, Retry-After %q, body %s; want 503 server_overloaded with Retry-After", status, hdr.Get("Retry-After"), resp)
	}
	held.Release()
	if status, _, resp := postHandler(t, g, "/v1/completions", body, nil); status != http.StatusOK {
		t.Fatalf("after the release: %d %s", status, resp)
	}
	if n := g.bodies.Budget.Held(); n != 0 {
		t.Fatalf("%d bytes held after the request ended", n)
	}
}
