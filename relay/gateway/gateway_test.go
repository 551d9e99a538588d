package gateway

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestDecisionLocalVsRemote(t *testing.T) {
	tests := []struct {
		name        string
		localDepth  int
		remoteDepth int
		stale       bool
		wantDC      string
	}{
		// 10 blocks of 4 tokens at 1 ms/token save 40 ms against a 10 ms RTT.
		{name: "deeper remote prefix pays for the round trip", remoteDepth: 10, wantDC: "dc-b"},
		// 2 blocks save 8 ms, less than the 10 ms RTT.
		{name: "short remote prefix does not", remoteDepth: 2, wantDC: "dc-a"},
		{name: "local prefix as deep stays local", localDepth: 10, remoteDepth: 10, wantDC: "dc-a"},
		{name: "stale lane is ignored", remoteDepth: 10, stale: true, wantDC: "dc-a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := federation(t, 10*time.Millisecond, costly)
			a.local = fixedDepth(tt.localDepth)
			r := lane("dc-b", tt.remoteDepth)
			if tt.stale {
				r.Staleness = time.Hour
			}
			a.remote.set(r)
			// dc-b would send everything back to dc-a if it could.
			b.remote.set(lane("dc-a", 10))
			st, h, body := post(t, a.srv.URL, "/v1/completions", tokensBody("shared", 40, false), nil)
			if st != http.StatusOK || h.Get(DCHeader) != tt.wantDC {
				t.Fatalf("status %d dc %q body %s, want 200 from %s", st, h.Get(DCHeader), body, tt.wantDC)
			}
			if !strings.Contains(body, `"served_by":"`+tt.wantDC+`-n0"`) || h.Get("X-Kvrouter-Worker") != tt.wantDC+"-n0/0" {
				t.Fatalf("answer %s worker %q not from %s", body, h.Get("X-Kvrouter-Worker"), tt.wantDC)
			}
			if tt.wantDC == "dc-b" {
				if a.nodes[0].count() != 0 || b.nodes[0].last().header.Get(ForwardedHeader) != "dc-a" {
					t.Fatal("a forwarded request was served twice or not marked")
				}
				if got := settled(b.gw.metrics.Requests.WithLabelValues(DecisionForwardedIn), 1); got != 1 {
					t.Fatalf("dc-b forwarded_in = %v", got)
				}
			}
		})
	}
}

func TestForwardedRequestIsNeverForwardedAgain(t *testing.T) {
	a, b := federation(t, time.Millisecond, costly)
	b.remote.set(lane("dc-a", 100)) // dc-b's policy would choose dc-a
	hdr := map[string]string{ForwardedHeader: "dc-c"}
	st, h, _ := post(t, b.srv.URL, "/v1/completions", tokensBody("shared", 40, false), hdr)
	if st != http.StatusOK || h.Get(DCHeader) != "dc-b" || a.nodes[0].count() != 0 {
		t.Fatalf("status %d dc %q, a served %d: forwarded request left dc-b", st, h.Get(DCHeader), a.nodes[0].count())
	}
	// Without the header the same request goes to dc-a: the header alone
	// kept it home.
	_, h, _ = post(t, b.srv.URL, "/v1/completions", tokensBody("shared", 40, false), nil)
	if h.Get(DCHeader) != "dc-a" {
		t.Fatalf("control request served by %q", h.Get(DCHeader))
	}
}

// TestForwardedRequestIsNotParsedAgain checks that the forwarded mark is
// read before the body is parsed: the forwarding gateway parsed it, and
// a request this gateway's limit would refuse still reaches its node.
func TestForwardedRequestIsNotParsedAgain(t *testing.T) {
	node := newFakeNode(t, "n0")
	g := newGateway(t, Config{DC: "dc-b", Nodes: []string{node.srv.URL}, MaxPromptTokens: 4})
	st, h, _ := postHandler(t, g, "/v1/completions", tokensBody("m", 40, false), map[string]string{ForwardedHeader: "dc-a"})
	if st != http.StatusOK || h.Get(DCHeader) != "dc-b" || node.count() != 1 {
		t.Fatalf("status %d dc %q, node served %d", st, h.Get(DCHeader), node.count())
	}
	if st, _, _ := postHandler(t, g, "/v1/completions", tokensBody("m", 40, false), nil); st != http.StatusBadRequest {
		t.Fatalf("unforwarded request over the limit: status %d", st)
	}
}

func TestRemoteFailureBeforeFirstByteFallsBack(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(b *dcHarness)
	}{
		{name: "remote answers 5xx", break_: func(b *dcHarness) { b.nodes[0].status.Store(http.StatusServiceUnavailable) }},
		{name: "remote gateway unreachable", break_: func(b *dcHarness) { b.srv.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := federation(t, time.Millisecond, costly)
			a.remote.set(lane("dc-b", 10))
			tt.break_(b)
			st, h, body := post(t, a.srv.URL, "/v1/completions", tokensBody("shared", 40, false), nil)
			if st != http.StatusOK || h.Get(DCHeader) != "dc-a" || !strings.Contains(body, "dc-a-n0") {
				t.Fatalf("status %d dc %q body %s: no local fallback", st, h.Get(DCHeader), body)
			}
			if got := settled(a.gw.metrics.Requests.WithLabelValues(DecisionFallback), 1); got != 1 {
				t.Fatalf("fallbacks = %v, want 1", got)
			}
		})
	}
}

func TestStreamingPassThrough(t *testing.T) {
	a, b := federation(t, time.Millisecond, costly)
	a.remote.set(lane("dc-b", 10))
	b.nodes[0].gate = make(chan struct{})
	req, _ := http.NewRequest(http.MethodPost, a.srv.URL+"/v1/completions", strings.NewReader(tokensBody("shared", 40, true)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get(DCHeader) != "dc-b" || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("headers %v", resp.Header)
	}
	rd := bufio.NewReader(resp.Body)
	var got strings.Builder
	// Each event must arrive before the node is allowed to write the next:
	// the two gateways flush as they go.
	for i := range sseEvents {
		if i > 0 {
			b.nodes[0].gate <- struct{}{}
		}
		for !strings.HasSuffix(got.String(), sseEvents[i]) {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("event %d: %v (so far %q)", i, err, got.String())
			}
			got.WriteString(line)
		}
	}
	rest, _ := io.ReadAll(rd)
	if got.String()+string(rest) != strings.Join(sseEvents, "") {
		t.Fatalf("stream %q not byte-exact", got.String()+string(rest))
	}
}

func TestMidStreamFailureEndsWithErrorEvent(t *testing.T) {
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sseEvents[0])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the node dies mid-stream
	}))
	defer broken.Close()
	g := newGateway(t, Config{DC: "dc-a", Nodes: []string{broken.URL}})
	st, _, body := postHandler(t, g, "/v1/completions", tokensBody("m", 8, true), nil)
	if st != http.StatusOK || !strings.HasPrefix(body, sseEvents[0]) || !strings.Contains(body, `"code":"upstream_error"`) {
		t.Fatalf("status %d body %q", st, body)
	}
}

func TestRetryNextNodeOnConnectionRefused(t *testing.T) {
	dead := newFakeNode(t, "dead")
	dead.srv.Close()
	live := newFakeNode(t, "live")
	g := newGateway(t, Config{DC: "dc-a", Nodes: []string{dead.srv.URL, live.srv.URL}})
	for range 4 {
		st, h, _ := postHandler(t, g, "/v1/completions", tokensBody("m", 8, false), nil)
		if st != http.StatusOK || h.Get("X-Kvrouter-Worker") != "live/0" {
			t.Fatalf("status %d worker %q", st, h.Get("X-Kvrouter-Worker"))
		}
	}
	if live.count() != 4 || testutil.ToFloat64(g.metrics.NodeRetries) != 1 {
		t.Fatalf("live served %d, retries %v; want 4 and 1 (the dead node is marked down)",
			live.count(), testutil.ToFloat64(g.metrics.NodeRetries))
	}
}

func TestAllNodesRefusedIs502(t *testing.T) {
	dead := newFakeNode(t, "dead")
	dead.srv.Close()
	g := newGateway(t, Config{DC: "dc-a", Nodes: []string{dead.srv.URL}})
	st, _, body := postHandler(t, g, "/v1/completions", tokensBody("m", 8, false), nil)
	if _, _, code, _ := errorBody(t, body); st != http.StatusBadGateway || code != "upstream_error" {
		t.Fatalf("status %d body %s", st, body)
	}
}

// settled reads a counter, waiting up to ten seconds (a failure bound)
// for it to reach want: a request is counted when its handler returns,
// which may be just after the client has read the whole answer.
func settled(c prometheus.Counter, want float64) float64 {
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(c) != want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	return testutil.ToFloat64(c)
}

// TestTextPromptFollowsTheLoadTerms: a text prompt has no block hashes,
// so only the load terms can move it: it stays home unless the local DC
// is saturated and a remote one is idle.
func TestTextPromptFollowsTheLoadTerms(t *testing.T) {
	const text = `{"model":"shared","prompt":"hello there"}`
	for _, saturated := range []bool{false, true} {
		want := "dc-a"
		if saturated {
			want = "dc-b"
		}
		t.Run(want, func(t *testing.T) {
			a, _ := federation(t, 10*time.Millisecond, func(c *Config) {
				if c.DC == "dc-a" && saturated {
					c.LocalLoad = func() producer.Load { return producer.Load{Engines: 1, Utilization: 0.99} }
				}
			})
			a.remote.set(lane("dc-b", 10))
			st, h, body := post(t, a.srv.URL, "/v1/completions", text, nil)
			if st != http.StatusOK || h.Get(DCHeader) != want {
				t.Fatalf("status %d dc %q body %s, want 200 from %s", st, h.Get(DCHeader), body, want)
			}
		})
	}
}
