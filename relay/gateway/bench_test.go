package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/internal/oaiedge/oaiedgetest"
	"github.com/kvrouter/kvrouter/routing"
)

// benchTokens is a 4,096-token prompt: 64 blocks of 64.
func benchTokens() []uint32 {
	ts := make([]uint32, 4096)
	for i := range ts {
		ts[i] = uint32(i*7919) % 50000
	}
	return ts
}

// BenchmarkDecision measures the per-request decision overhead of a
// 64-block request: hashing, the exact local depth over a producer-like
// refcount map holding the first 32 blocks, a remote query returning
// three lanes (a fake standing in for the consumer, measured separately
// in relay/consumer) and the policy.
func BenchmarkDecision(b *testing.B) {
	tokens := benchTokens()
	hs, _ := routing.BlockHashes(nil, tokens, 64, routing.Seed("", ""))
	held := refcount{}
	for _, h := range hs[:32] {
		held[h] = 1
	}
	remote := &fakeRemote{}
	remote.set(lane("dc-b", 48), lane("dc-c", 10), lane("dc-d", 0))
	g, err := New(Config{DC: "dc-a", Nodes: []string{"http://n"}, Now: time.Now, LocalIndex: RefsIndex{"m": held}, RemoteIndex: remote,
		Remotes: []Remote{{DC: "dc-b", URL: "http://b", WANRTT: 50 * time.Millisecond}, {DC: "dc-c", URL: "http://c"}, {DC: "dc-d", URL: "http://d"}}})
	if err != nil {
		b.Fatal(err)
	}
	req := oaiedge.Request{Model: "m", Tokens: tokens}
	now := time.Unix(0, 0)
	b.Run("decide", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sc := scratchPool.Get().(*scratch)
			if ch := g.decide(&req, now, sc); !ch.Remote || ch.Best.DC != "dc-b" {
				b.Fatalf("chose %+v", ch.Best)
			}
			scratchPool.Put(sc)
		}
	})
	body := []byte(tokensBody("m", 4096, false))
	b.Run("parse+decide", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			r, err := oaiedge.ParsePooled(body, oaiedge.Completions, oaiedge.Options{MaxPromptTokens: oaiedge.MaxPromptTokens})
			if err != nil {
				b.Fatal(err)
			}
			sc := scratchPool.Get().(*scratch)
			g.decide(r, now, sc)
			scratchPool.Put(sc)
			r.Release()
		}
	})
}

// BenchmarkProxyOverhead sends the same small request alternately
// straight to a router node and through a gateway in front of it, in one
// run, and reports the latency of each and the gateway's added latency
// (p50 and p99 over the iterations, in microseconds), for a 4,096-token
// prompt (parsing, hashing and the decision included) and a short text
// prompt (mostly the extra hop).
func BenchmarkProxyOverhead(b *testing.B) {
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"cmpl","choices":[{"text":"ok"}]}`)
	}))
	defer node.Close()
	g, err := New(Config{DC: "dc-a", Nodes: []string{node.URL}, Now: time.Now, RemoteIndex: &fakeRemote{}, LocalIndex: fixedDepth(0)})
	if err != nil {
		b.Fatal(err)
	}
	gw := httptest.NewServer(g.Handler())
	defer gw.Close()
	defer g.transport.CloseIdleConnections()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	for _, c := range []struct{ name, body string }{
		{"tokens4096", tokensBody("m", 4096, false)},
		{"text", `{"model":"m","prompt":"Say hello."}`},
	} {
		b.Run(c.name, func(b *testing.B) { compareProxy(b, client, node.URL, gw.URL, []byte(c.body)) })
	}
}

// compareProxy alternates direct and gateway requests of body.
func compareProxy(b *testing.B, client *http.Client, nodeURL, gwURL string, body []byte) {
	var direct, via []time.Duration
	for b.Loop() {
		direct = append(direct, oaiedgetest.TimedPost(b, client, nodeURL+"/v1/completions", body))
		via = append(via, oaiedgetest.TimedPost(b, client, gwURL+"/v1/completions", body))
	}
	report(b, "direct", direct)
	report(b, "gateway", via)
	added := make([]time.Duration, len(via))
	for i := range via {
		added[i] = via[i] - direct[i]
	}
	report(b, "added", added)
}

// report records the p50 and p99 of ds in microseconds.
func report(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) float64 { return float64(s[int(p*float64(len(s)-1))]) / 1e3 }
	b.ReportMetric(q(0.5), name+"-p50-µs")
	b.ReportMetric(q(0.99), name+"-p99-µs")
}
