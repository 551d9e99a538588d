package node_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/fleet/natsbus"
	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/mtls/mtlstest"
	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// Shape of BenchmarkNodeAddedLatency: the latency target is stated
// for 12,288-token pre-tokenized completions at 1,000 requests/s.
const (
	latTokens     = 12_288
	latPrefix     = 4_096 // tokens of a shared prefix
	latPrefixes   = 4     // distinct shared prefixes, two per engine
	latRate       = 1_000 // requests per second through the node
	latRequests   = 3_000 // per path and iteration: three seconds of load
	latWarmup     = 200   // untimed requests per path before the run
	latBlockSize  = 64    // the mocker's default block size
	latEngines    = 2
	latVocabulary = 150_000
)

// latAnswer is the fake engine's whole non-streaming answer.
const latAnswer = `{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"ok","finish_reason":"length"}],"usage":{"prompt_tokens":12288,"completion_tokens":2,"total_tokens":12290}}`

// fakeEngine is an engine that answers every completion at once: an HTTP
// server with a fixed answer, plus the event-plane duties of a real one
// (card, heartbeats, KV events and snapshot replies), so that the node
// routes to it exactly as to a mocker while the engine itself costs
// nearly nothing.
type fakeEngine struct {
	id   uint64
	srv  *httptest.Server
	bus  *natsbus.Bus
	card *kvrpb.WorkerCard
	sub  *nats.Subscription
	stop chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	events []routing.Event
}

func startFakeEngine(b *testing.B, natsURL string, id uint64) *fakeEngine {
	b.Helper()
	e := &fakeEngine{id: id, stop: make(chan struct{})}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, latAnswer)
	}))
	bus, err := natsbus.Open(natsbus.Config{URL: natsURL}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	e.bus = bus
	e.card = &kvrpb.WorkerCard{EngineId: id, DpSize: 1, Model: "m", BlockSize: latBlockSize,
		TotalKvBlocks: 1 << 20, MaxNumBatchedTokens: 16384, Device: kvrpb.DeviceKind_DEVICE_KIND_GPU,
		EndpointUrl: e.srv.URL, Version: kvrpb.Version, Incarnation: id}
	sum := sha256.Sum256([]byte(e.srv.URL))
	e.card.Checksum = hex.EncodeToString(sum[:16])
	e.sub, err = bus.Conn.Subscribe(kvrpb.SubjectSnapshot("dc1", id, 0), func(m *nats.Msg) { _ = m.Respond(e.snapshot()) })
	if err != nil {
		b.Fatal(err)
	}
	e.publish(kvrpb.SubjectRegister("dc1", id), e.card)
	e.wg.Go(e.heartbeats)
	return e
}

// heartbeats publishes a heartbeat every 100 ms until close.
func (e *fakeEngine) heartbeats() {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		e.publish(kvrpb.SubjectHeartbeat("dc1", e.id), &kvrpb.Heartbeat{EngineId: e.id, CardChecksum: e.card.Checksum,
			Incarnation: e.card.Incarnation, Loads: []*kvrpb.RankLoad{{KvTotalBlocks: e.card.TotalKvBlocks, LastEventId: e.lastEventID()}}})
		select {
		case <-e.stop:
			return
		case <-tick.C:
		}
	}
}

func (e *fakeEngine) publish(subject string, msg proto.Message) {
	data, err := proto.Marshal(msg)
	if err == nil {
		_ = e.bus.Conn.Publish(subject, data)
	}
}

func (e *fakeEngine) lastEventID() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return uint64(len(e.events))
}

// store caches tokens' complete blocks on the engine and publishes the
// stored event.
func (e *fakeEngine) store(tokens []uint32) {
	locals, _ := routing.LocalHashes(nil, tokens, latBlockSize, routing.HashSeed)
	seqs := routing.SeqHashes(nil, locals)
	blocks := make([]routing.StoredBlock, len(locals))
	for i := range locals {
		blocks[i] = routing.StoredBlock{Engine: routing.EngineHash(seqs[i]), Local: locals[i]}
	}
	w := routing.Worker{ID: routing.WorkerID(e.id)}
	e.mu.Lock()
	defer e.mu.Unlock()
	ev := routing.Event{Worker: w, ID: uint64(len(e.events) + 1), Kind: routing.EventStored, Tier: routing.TierDevice, Blocks: blocks}
	e.events = append(e.events, ev)
	e.publish(kvrpb.SubjectKV("dc1", e.id, 0), wire.EncodeBatch(w, e.card.Incarnation, []routing.Event{ev}))
}

// snapshot is the reply to a snapshot request: every event so far.
func (e *fakeEngine) snapshot() []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	reply := &kvrpb.SnapshotReply{EngineId: e.id, Incarnation: e.card.Incarnation, LastEventId: uint64(len(e.events))}
	for i := range e.events {
		reply.Events = append(reply.Events, wire.EncodeEvent(&e.events[i]))
	}
	data, _ := proto.Marshal(reply)
	return data
}

func (e *fakeEngine) close() {
	close(e.stop)
	e.wg.Wait()
	_ = e.sub.Unsubscribe()
	e.bus.Close()
	e.srv.Close()
}

// startLatencyNode runs a node with the default configuration on loopback
// and two fake engines registered with it, each holding two of the shared
// prefixes.
//
// With tlsFiles set, the node's client-facing listener serves HTTPS with
// its certificate and key (the engines stay on plain HTTP), and base is
// an https URL.
func startLatencyNode(b *testing.B, prefixes [][]uint32, tlsFiles *mtls.Files) (base string, engines []*fakeEngine, m *metrics.Metrics) {
	_, base, engines, m = startLatencyNodeWith(b, prefixes, tlsFiles, nil)
	return base, engines, m
}

// startLatencyNodeWith is startLatencyNode with the configuration
// adjusted by tweak (nil: none); it also returns the node.
func startLatencyNodeWith(b *testing.B, prefixes [][]uint32, tlsFiles *mtls.Files, tweak func(*node.Config)) (n *node.Node, base string, engines []*fakeEngine, m *metrics.Metrics) {
	b.Helper()
	cfg := node.DefaultConfig()
	cfg.HTTPAddr, cfg.NATSListen = "127.0.0.1:0", "127.0.0.1:0"
	scheme := "http://"
	if tlsFiles != nil {
		cfg.TLSCert, cfg.TLSKey, scheme = tlsFiles.Cert, tlsFiles.Key, "https://"
	}
	if tweak != nil {
		tweak(&cfg)
	}
	n, err := node.New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		if err := n.Run(ctx); err != nil {
			b.Errorf("node: %v", err)
		}
	})
	if err := n.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	for i := range latEngines {
		e := startFakeEngine(b, n.NATSURL(), uint64(i+1))
		b.Cleanup(e.close)
		engines = append(engines, e)
	}
	m = n.Metrics()
	waitFor(b, "engines and their snapshots", func() bool {
		return n.Engines() == latEngines && testutil.ToFloat64(m.Resyncs.WithLabelValues("ok")) >= latEngines
	})
	for i, p := range prefixes {
		engines[i%latEngines].store(p)
	}
	waitFor(b, "stored events", func() bool {
		return testutil.ToFloat64(m.EventsApplied.WithLabelValues("stored", "ok")) >= float64(len(prefixes))
	})
	return n, scheme + n.Addr().String(), engines, m
}

func waitFor(b *testing.B, what string, ok func() bool) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// latencyBodies renders n distinct completions bodies of latTokens ids.
// Half of them start with one of the shared prefixes; the rest of every
// prompt is a window of one long random token stream at a distinct offset,
// so no two prompts share more than their prefix.
func latencyBodies(n int, prefixes [][]uint32, rng *rand.Rand) [][]byte {
	stream := make([]uint32, latTokens+7*n)
	for i := range stream {
		stream[i] = uint32(rng.IntN(latVocabulary))
	}
	text, starts := renderTokens(stream)
	prefixText := make([][]byte, len(prefixes))
	for i, p := range prefixes {
		t, _ := renderTokens(p)
		prefixText[i] = append(t, ',')
	}
	bodies := make([][]byte, n)
	for i := range bodies {
		var b bytes.Buffer
		b.WriteString(`{"model":"m","max_tokens":2,"prompt":[`)
		rest := latTokens
		if i%2 == 0 {
			b.Write(prefixText[rng.IntN(len(prefixes))])
			rest -= latPrefix
		}
		off := 7 * i
		b.Write(text[starts[off] : starts[off+rest]-1])
		b.WriteString(`]}`)
		bodies[i] = b.Bytes()
	}
	return bodies
}

// renderTokens writes tokens as comma-separated decimals (with a trailing
// comma) and returns where each token starts, plus the end.
func renderTokens(tokens []uint32) ([]byte, []int) {
	var text []byte
	starts := make([]int, 0, len(tokens)+1)
	for _, t := range tokens {
		starts = append(starts, len(text))
		text = append(strconv.AppendUint(text, uint64(t), 10), ',')
	}
	starts = append(starts, len(text))
	return text[:len(text)-1], starts
}

// sample is one request's latency on both paths.
type sample struct{ node, direct time.Duration }

// BenchmarkNodeAddedLatency measures the latency a whole router node adds
// to a 12,288-token pre-tokenized completion at 1,000 requests/s: a real
// node (default configuration, embedded NATS) in front of two fake engines
// that answer at once, all over loopback sockets. Requests are sent open
// loop, one every millisecond through the node, and each body is also sent
// straight to an engine half a millisecond later, so both paths see the
// same machine load. The reported added latencies are the differences of
// the two paths' percentiles; paired-p50/p99 are the percentiles of the
// per-request differences, which also carry the direct path's jitter.
//
// Both paths use the same client, transport and body bytes, and the same
// fake engine code (the direct path always calls engine 1, which also
// serves its share of the routed requests), so what the client does is
// the same on both and cancels out of the difference. The half-interval
// offset keeps the pairs apart: a routed request of up to 500 µs is done
// before its direct twin starts. The hashing, matching, scheduling and
// total metrics are the node's own mean decision time per phase, read
// from its overhead histogram over the timed requests.
//
// The sub-benchmarks run it twice in one run: plain, and tls, where the
// node's client-facing listener serves HTTPS (--tls-cert/--tls-key, TLS
// 1.3 over pooled HTTP/1.1 connections) while the engines and the direct
// path stay plain; so tls's added latency is the node's plus what
// encrypting the client hop costs, and the difference of the two is the
// cost of TLS at the edge.
func BenchmarkNodeAddedLatency(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchAddedLatency(b, false) })
	b.Run("tls", func(b *testing.B) { benchAddedLatency(b, true) })
}

func benchAddedLatency(b *testing.B, withTLS bool) {
	rng := rand.New(rand.NewPCG(7, 7))
	prefixes := make([][]uint32, latPrefixes)
	for i := range prefixes {
		prefixes[i] = make([]uint32, latPrefix)
		for j := range prefixes[i] {
			prefixes[i][j] = uint32(rng.IntN(latVocabulary))
		}
	}
	// The client's write buffer holds a whole request, headers and body,
	// so each request goes out in one write without a copy buffer: client,
	// node and engines share this process and its garbage collector, and
	// a real client's garbage would not land on the node's.
	tr := &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true, WriteBufferSize: 128 << 10}
	defer tr.CloseIdleConnections()
	var files *mtls.Files
	if withTLS {
		f := mtlstest.WritePKI(b, b.TempDir())
		pool, err := mtls.CAPool("ca", f.CA)
		if err != nil {
			b.Fatal(err)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
		files = &f
	}
	base, engines, m := startLatencyNode(b, prefixes, files)
	bodies := latencyBodies(latWarmup+latRequests, prefixes, rng)
	client := &http.Client{Transport: tr}
	nodeURL, directURL := base+"/v1/completions", engines[0].srv.URL+"/v1/completions"
	var samples []sample
	var cpu time.Duration
	var phases [len(latPhases)]phaseTime
	for b.Loop() {
		openLoop(b, client, nodeURL, directURL, bodies[:latWarmup])
		before, beforePhases := processCPU(), readPhases(b, m)
		samples = append(samples, openLoop(b, client, nodeURL, directURL, bodies[latWarmup:])...)
		cpu += processCPU() - before
		for i, p := range readPhases(b, m) {
			phases[i].add(p.minus(beforePhases[i]))
		}
	}
	reportLatency(b, samples)
	b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(len(samples)), "cpu-us/pair")
	for i, name := range latPhases {
		b.ReportMetric(phases[i].meanMicros(), name+"-us")
	}
}

// latPhases are the phases of the node's routing decision reported by
// BenchmarkNodeAddedLatency, from kvrouter_router_overhead_seconds:
// the mean time Route spent on them per request, which tells how much of
// the added latency is the decision and how much the HTTP edge, parsing
// and proxying around it.
var latPhases = [...]string{"hashing", "matching", "scheduling", "total"}

// phaseTime is a histogram's sum (in seconds) and count.
type phaseTime struct {
	sum   float64
	count uint64
}

func (p phaseTime) minus(q phaseTime) phaseTime { return phaseTime{p.sum - q.sum, p.count - q.count} }

func (p *phaseTime) add(q phaseTime) { p.sum, p.count = p.sum+q.sum, p.count+q.count }

func (p phaseTime) meanMicros() float64 {
	if p.count == 0 {
		return 0
	}
	return p.sum * 1e6 / float64(p.count)
}

// readPhases reads the decision phase histograms of the node's metrics.
func readPhases(b *testing.B, m *metrics.Metrics) (out [len(latPhases)]phaseTime) {
	for i, name := range latPhases {
		var d dto.Metric
		if err := m.Overhead.WithLabelValues(name).(prometheus.Metric).Write(&d); err != nil {
			b.Fatal(err)
		}
		out[i] = phaseTime{d.GetHistogram().GetSampleSum(), d.GetHistogram().GetSampleCount()}
	}
	return out
}

// processCPU is the CPU time the process has used. Per pair of requests
// (one through the node, one direct) it is a figure of the node's cost
// that is far less sensitive to other load on the machine than latency.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// openLoop sends every body through the node at latRate, and straight to
// the engine half an interval later, without waiting for answers.
func openLoop(b *testing.B, c *http.Client, nodeURL, directURL string, bodies [][]byte) []sample {
	out := make([]sample, len(bodies))
	interval := time.Second / latRate
	var wg sync.WaitGroup
	start := time.Now()
	for i, body := range bodies {
		at := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(at))
		wg.Go(func() { out[i].node = timePost(b, c, nodeURL, body) })
		time.Sleep(time.Until(at.Add(interval / 2)))
		wg.Go(func() { out[i].direct = timePost(b, c, directURL, body) })
	}
	wg.Wait()
	return out
}

// timePost posts body and reads the whole answer.
func timePost(b *testing.B, c *http.Client, url string, body []byte) time.Duration {
	start := time.Now()
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Error(err)
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Errorf("%s: status %d", url, resp.StatusCode)
	}
	return time.Since(start)
}

func reportLatency(b *testing.B, samples []sample) {
	viaNode, direct, paired := make([]time.Duration, len(samples)), make([]time.Duration, len(samples)), make([]time.Duration, len(samples))
	for i, s := range samples {
		viaNode[i], direct[i], paired[i] = s.node, s.direct, s.node-s.direct
	}
	n50, n99 := latPercentiles(viaNode)
	d50, d99 := latPercentiles(direct)
	p50, p99 := latPercentiles(paired)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(n50-d50), "added-p50-us")
	b.ReportMetric(us(n99-d99), "added-p99-us")
	b.ReportMetric(us(d50), "direct-p50-us")
	b.ReportMetric(us(d99), "direct-p99-us")
	b.ReportMetric(us(p50), "paired-p50-us")
	b.ReportMetric(us(p99), "paired-p99-us")
	b.ReportMetric(float64(len(samples)), "requests")
}

func latPercentiles(d []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0, 0
	}
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}

// BenchmarkLoopbackWake measures what one idle period costs a loopback
// TCP round trip of 8 bytes on this machine: back to back (threads stay
// awake) and with the request rate of BenchmarkNodeAddedLatency, one every
// millisecond, so that both ends' threads sleep in between and each round
// trip pays two thread wake-ups. Each hop the router adds to a request
// pays two more (the node waking for the client's request and for the
// engine's answer), which is part of its added latency that no code in
// the node can remove.
func BenchmarkLoopbackWake(b *testing.B) {
	c := loopbackPeer(b, func(c net.Conn) { _, _ = io.Copy(c, c) })
	for _, gap := range []time.Duration{0, time.Millisecond} {
		b.Run("gap-"+gap.String(), func(b *testing.B) {
			buf := make([]byte, 8)
			var lat []time.Duration
			for b.Loop() {
				time.Sleep(gap)
				start := time.Now()
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			p50, p99 := latPercentiles(lat)
			b.ReportMetric(float64(p50)/float64(time.Microsecond), "rtt-p50-us")
			b.ReportMetric(float64(p99)/float64(time.Microsecond), "rtt-p99-us")
		})
	}
}

// BenchmarkLoopbackBody measures what moving one request body of
// BenchmarkNodeAddedLatency (12,288 token ids, about 77 KB of JSON) over a
// loopback TCP connection costs on this machine, at that benchmark's rate
// of one a millisecond: write-us is the sender's write call (the kernel
// copies the body and runs the receiving side of TCP within it), rtt-us the
// time until the receiver, having read it all, answers one byte. The
// router adds one such hop to every request, a cost that belongs to the
// transport and not to the node's code.
func BenchmarkLoopbackBody(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 7))
	prefix := make([]uint32, latPrefix)
	for j := range prefix {
		prefix[j] = uint32(rng.IntN(latVocabulary))
	}
	body := latencyBodies(1, [][]uint32{prefix}, rng)[0]
	c := loopbackPeer(b, func(c net.Conn) {
		buf := make([]byte, len(body))
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf[:1]); err != nil {
				return
			}
		}
	})
	one := make([]byte, 1)
	var writes, rtts []time.Duration
	for b.Loop() {
		time.Sleep(time.Millisecond)
		start := time.Now()
		if _, err := c.Write(body); err != nil {
			b.Fatal(err)
		}
		wrote := time.Since(start)
		if _, err := io.ReadFull(c, one); err != nil {
			b.Fatal(err)
		}
		writes, rtts = append(writes, wrote), append(rtts, time.Since(start))
	}
	w50, _ := latPercentiles(writes)
	r50, r99 := latPercentiles(rtts)
	b.ReportMetric(float64(len(body)), "body-bytes")
	b.ReportMetric(float64(w50)/float64(time.Microsecond), "write-p50-us")
	b.ReportMetric(float64(r50)/float64(time.Microsecond), "rtt-p50-us")
	b.ReportMetric(float64(r99)/float64(time.Microsecond), "rtt-p99-us")
}

// loopbackPeer listens on loopback, runs serve on the one connection it
// accepts, and returns the dialled other end; both close when the
// benchmark ends.
func loopbackPeer(b *testing.B, serve func(net.Conn)) net.Conn {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}
