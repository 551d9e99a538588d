package node_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// BenchmarkSelectBesideProxied measures, in one run on one node, the
// selection API's latency for a 12,288-token prompt at 1,000 requests/s
// beside the latency the proxied path adds to the same prompts at the
// same rate (BenchmarkNodeAddedLatency's measurement): first the proxied
// open loop (each body through the node and straight to an engine), then
// an open loop of gRPC Select calls over loopback with the same prompts
// as token ids. select-p50/p99 are the Select round trips as the caller
// sees them (the caller's encoding of 12,288 ids, gRPC's framing, the
// node's decoding and decision, the answer); proxied-added-p50/p99 are
// the differences of the proxied
// and direct paths' percentiles; the ratios divide the first by the
// second.
func BenchmarkSelectBesideProxied(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 7))
	prefixes := make([][]uint32, latPrefixes)
	for i := range prefixes {
		prefixes[i] = make([]uint32, latPrefix)
		for j := range prefixes[i] {
			prefixes[i][j] = uint32(rng.IntN(latVocabulary))
		}
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true, WriteBufferSize: 128 << 10}
	defer tr.CloseIdleConnections()
	n, base, engines, _ := startLatencyNodeWith(b, prefixes, nil, func(c *node.Config) { c.Selection.Addr = "127.0.0.1:0" })
	bodies := latencyBodies(latWarmup+latRequests, prefixes, rng)
	selects := selectRequests(b, bodies)
	cc, err := grpc.NewClient(n.SelectAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	sel := kvrpb.NewSelectionClient(cc)
	client := &http.Client{Transport: tr}
	nodeURL, directURL := base+"/v1/completions", engines[0].srv.URL+"/v1/completions"
	var proxied []sample
	var selected []time.Duration
	for b.Loop() {
		openLoop(b, client, nodeURL, directURL, bodies[:latWarmup])
		proxied = append(proxied, openLoop(b, client, nodeURL, directURL, bodies[latWarmup:])...)
		selectLoop(b, sel, selects[:latWarmup])
		selected = append(selected, selectLoop(b, sel, selects[latWarmup:])...)
	}
	reportSelect(b, selected, proxied)
}

// selectRequests are Select calls of the bodies' prompts as token ids.
func selectRequests(b *testing.B, bodies [][]byte) []*kvrpb.SelectRequest {
	out := make([]*kvrpb.SelectRequest, len(bodies))
	for i, body := range bodies {
		var p struct {
			Prompt []uint32 `json:"prompt"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			b.Fatal(err)
		}
		out[i] = &kvrpb.SelectRequest{Model: "m", Prompt: &kvrpb.SelectRequest_Tokens{Tokens: &kvrpb.SelectTokens{Ids: p.Prompt}}}
	}
	return out
}

// selectLoop calls Select at latRate, open loop, and returns each call's
// round trip.
func selectLoop(b *testing.B, c kvrpb.SelectionClient, reqs []*kvrpb.SelectRequest) []time.Duration {
	out := make([]time.Duration, len(reqs))
	interval := time.Second / latRate
	var wg sync.WaitGroup
	start := time.Now()
	for i, r := range reqs {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		wg.Go(func() {
			t := time.Now()
			if _, err := c.Select(context.Background(), r); err != nil {
				b.Error(err)
			}
			out[i] = time.Since(t)
		})
	}
	wg.Wait()
	return out
}

func reportSelect(b *testing.B, selected []time.Duration, proxied []sample) {
	viaNode, direct := make([]time.Duration, len(proxied)), make([]time.Duration, len(proxied))
	for i, s := range proxied {
		viaNode[i], direct[i] = s.node, s.direct
	}
	s50, s99 := latPercentiles(selected)
	n50, n99 := latPercentiles(viaNode)
	d50, d99 := latPercentiles(direct)
	a50, a99 := n50-d50, n99-d99
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(s50), "select-p50-us")
	b.ReportMetric(us(s99), "select-p99-us")
	b.ReportMetric(us(a50), "proxied-added-p50-us")
	b.ReportMetric(us(a99), "proxied-added-p99-us")
	if a50 > 0 && a99 > 0 {
		b.ReportMetric(float64(s50)/float64(a50), "select/added-p50")
		b.ReportMetric(float64(s99)/float64(a99), "select/added-p99")
	}
	b.ReportMetric(float64(len(selected)), "requests")
}
