package frontend

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/internal/oaiedge/oaiedgetest"
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/routing"
)

// benchRouter routes everything to one engine and keeps nothing.
type benchRouter struct{ endpoint string }

func (r benchRouter) Route(context.Context, *dispatch.Request) (*dispatch.Decision, error) {
	return dispatch.NewDecision(routing.Worker{ID: 1}, r.endpoint, nil, nil), nil
}
func (benchRouter) Models() []dispatch.Model             { return []dispatch.Model{{ID: "m"}} }
func (benchRouter) Unbind(context.Context, string) error { return nil }

// tokenBody is a completions body with n pre-tokenized prompt ids.
func tokenBody(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	var b bytes.Buffer
	b.WriteString(`{"model":"m","max_tokens":16,"prompt":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(rng.IntN(150000)))
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

const benchAnswer = `{"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"ok","finish_reason":"length"}],"usage":{"prompt_tokens":12288,"completion_tokens":16,"total_tokens":12304}}`

// BenchmarkProxyAddedLatency measures the latency the frontend adds to a
// non-streaming completions request with a 12,288-token pre-tokenized
// prompt: each iteration calls the engine directly and through the
// frontend, and the reported figures are the differences of the p50 and
// p99 latencies of the two paths, in microseconds.
func BenchmarkProxyAddedLatency(b *testing.B) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, benchAnswer)
	}))
	defer engine.Close()
	ts := startFrontend(b, Config{}, benchRouter{endpoint: engine.URL})
	body := tokenBody(12288, 1)
	direct := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer direct.Transport.(*http.Transport).CloseIdleConnections()
	var viaDirect, viaFrontend, scans []time.Duration
	for b.Loop() {
		viaDirect = append(viaDirect, oaiedgetest.TimedPost(b, direct, engine.URL+"/v1/completions", body))
		viaFrontend = append(viaFrontend, oaiedgetest.TimedPost(b, ts.client, ts.URL+"/v1/completions", body))
		scans = append(scans, timeScan(body))
	}
	d50, d99 := percentiles(viaDirect)
	f50, f99 := percentiles(viaFrontend)
	s50, _ := percentiles(scans)
	b.ReportMetric(us(f50-d50), "added-p50-µs")
	b.ReportMetric(us(f99-d99), "added-p99-µs")
	b.ReportMetric(us(d50), "direct-p50-µs")
	b.ReportMetric(us(s50), "scan-p50-µs")
	b.ReportMetric(float64(f50-d50)/float64(s50), "added-p50/scan")
}

// scanSink keeps the calibration loop from being optimised away.
var scanSink int

// timeScan times one trivial pass over the body's bytes: the machine's
// floor for any work proportional to the body, against which the added
// latency is expressed so that figures from differently loaded machines
// compare.
func timeScan(body []byte) time.Duration {
	start := time.Now()
	sum := 0
	for _, c := range body {
		sum += int(c)
	}
	scanSink = sum
	return time.Since(start)
}

// BenchmarkParseTokenPrompt measures parsing alone for the same body, the
// way the handler parses: into a recycled token buffer.
func BenchmarkParseTokenPrompt(b *testing.B) {
	body := tokenBody(12288, 1)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		p, err := parseRequest(body, oaiedge.Completions, oaiedge.MaxPromptTokens)
		if err != nil {
			b.Fatal(err)
		}
		p.Release()
	}
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0, 0
	}
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
