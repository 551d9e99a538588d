package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/internal/oaiedge/oaiedgetest"
)

// goroutineRequests is how many sequential requests each count covers:
// a goroutine per request would add one per request, a few from
// background work would not reach one in ten.
const goroutineRequests = 200

// goroutineSlack is the background goroutines per request tolerated.
const goroutineSlack = 0.1

// TestForwardStartsNoGoroutine: a request the gateway forwards to its
// router node creates no goroutine beyond what net/http's servers create
// for any request (measured in the same run on a request straight to the
// node), one per server crossed: the gateway's and the node's, and for a
// session request without a locator the node's once more for the
// binding lookup, whose connection is kept. Nothing outlives a request.
func TestForwardStartsNoGoroutine(t *testing.T) {
	node := newFakeNode(t, "n0", "m")
	g := newGateway(t, Config{DC: "dc-a", Nodes: []string{node.srv.URL}})
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	send := func(url, body, session string) func() {
		return func() {
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if session != "" {
				req.Header.Set("X-Session-Id", session)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
	}
	const whole, stream = `{"model":"m","prompt":"x"}`, `{"model":"m","prompt":"x","stream":true}`
	perServer := oaiedgetest.GoroutinesPerRequest(t, goroutineRequests, send(node.srv.URL+"/v1/completions", whole, ""))
	tests := []struct {
		name, body, session string
		servers             float64
	}{
		{name: "whole", body: whole, servers: 2},
		{name: "stream", body: stream, servers: 2},
		{name: "session", body: whole, session: "s1", servers: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := oaiedgetest.GoroutinesPerRequest(t, goroutineRequests, send(srv.URL+"/v1/completions", tc.body, tc.session))
			if got > tc.servers*perServer+goroutineSlack {
				t.Fatalf("%.2f goroutines created per forwarded request; net/http's servers create %.2f each, %v are crossed",
					got, perServer, tc.servers)
			}
		})
	}
}
