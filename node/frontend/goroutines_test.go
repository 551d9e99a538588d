package frontend

import (
	"context"
	"io"
	"net/http"
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

// TestForwardStartsNoGoroutine: a forwarded request, answered whole or
// streamed, with its engine's lost context set as the dispatcher sets it,
// creates no goroutine beyond what net/http's servers create for any
// request (measured in the same run on a request straight to the
// engine): two servers are crossed, the frontend's and the engine's.
// Nothing outlives a request either.
func TestForwardStartsNoGoroutine(t *testing.T) {
	ts, r, e := setup(t, Config{}, nil)
	lost, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	r.lost = lost
	send := func(url, body string) func() {
		return func() {
			resp, err := ts.client.Post(url, "application/json", strings.NewReader(body))
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
	perServer := oaiedgetest.GoroutinesPerRequest(t, goroutineRequests, send(e.URL+"/v1/completions", whole))
	for _, tc := range []struct{ name, body string }{{"whole", whole}, {"stream", stream}} {
		t.Run(tc.name, func(t *testing.T) {
			got := oaiedgetest.GoroutinesPerRequest(t, goroutineRequests, send(ts.URL+"/v1/completions", tc.body))
			if got > 2*perServer+goroutineSlack {
				t.Fatalf("%.2f goroutines created per forwarded request; net/http's servers create %.2f each, two are crossed", got, perServer)
			}
		})
	}
}
