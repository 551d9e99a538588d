package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvrouter/kvrouter/fleet/declared"
	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/mocker/server"
	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/routing"
)

// zmqPubWriter is the goroutine of every zmq4 PUB socket, which its Close
// never stops (zmq4 v0.17.0); the mockers below own such sockets.
const zmqPubWriter = "github.com/go-zeromq/zmq4.(*pubMWriter).run"

// vllmEngine is a mocker speaking vLLM's wire (OpenAI HTTP, ZMQ/msgpack
// KV events with a replay socket), declared to the node by an --engine
// entry, with no kvrouter code between them.
type vllmEngine struct {
	srv         *server.Server
	url         string
	pub, replay string
	worker      string
	// sick makes /health answer 503, so that the node's probes fail and
	// it expires the engine.
	sick atomic.Bool
	// stop ends the engine; it runs at the latest when the test ends.
	stop func()
}

// startVLLMEngine runs a vLLM-wire mocker on loopback that keeps steps
// batches for replay (0: the default).
func startVLLMEngine(t *testing.T, id uint64, steps int) *vllmEngine {
	t.Helper()
	srv, err := server.New(server.Config{EngineID: id, Protocol: server.ProtocolVLLM,
		KVEventsEndpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0", ReplayBufferSteps: steps,
		Engine: mocker.Config{Model: model, BlockSize: 16, NumBlocks: 1024, SpeedUp: 100},
		Rand:   rand.New(rand.NewPCG(id, 5))}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	own, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &vllmEngine{srv: srv, url: "http://" + front.Addr().String()}
	e.worker = routing.Worker{ID: declared.EngineID(e.url)}.String()
	// The node reaches the engine through this front, whose /health can
	// be made to fail.
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" && e.sick.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		srv.Handler().ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, own) }()
	go func() { _ = hs.Serve(front) }()
	e.stop = sync.OnceFunc(func() {
		_ = hs.Close()
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("engine %d: %v", id, err)
		}
	})
	t.Cleanup(e.stop)
	// The front answers at once; the engine's sockets are bound once
	// their ports are known.
	waitUntil(t, 10*time.Second, "the engine's sockets", func() bool {
		e.pub, e.replay, err = srv.KVEventsEndpoints(0)
		return err == nil && !strings.HasSuffix(e.pub, ":0") && !strings.HasSuffix(e.replay, ":0")
	})
	return e
}

func (e *vllmEngine) declaration() string {
	return fmt.Sprintf("url=%s,block-size=16,kv-events=%s,replay=%s", e.url, e.pub, e.replay)
}

// cache has the engine itself serve a prompt, so that it caches the
// prompt's blocks and publishes them in one batch, without the router
// choosing the engine.
func (e *vllmEngine) cache(t *testing.T, tokens []int) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": tokens, "max_tokens": 1})
	resp, err := http.Post(e.url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("engine completion: status %d", resp.StatusCode)
	}
}

// cachedBlocks asks the node's /v1/route/explain how many blocks of
// tokens each routable engine holds; nil while the node does not answer.
func (f *fleet) cachedBlocks(tokens []int) map[string]int {
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": tokens})
	resp, err := http.Post(f.base+"/v1/route/explain", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var out struct {
		Engines []struct {
			Engine string `json:"engine"`
			Cached int    `json:"cached_blocks"`
		} `json:"engines"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		return nil
	}
	m := map[string]int{}
	for _, e := range out.Engines {
		m[e.Engine] = e.Cached
	}
	return m
}

// startVLLMFleet runs a single node in front of two declared vLLM-wire
// engines, the first keeping steps batches for replay and declared with
// the extra keys (",key=value..."), and waits until both are routable.
func startVLLMFleet(t *testing.T, steps int, extra string) (*fleet, *vllmEngine, *vllmEngine) {
	t.Helper()
	a, b := startVLLMEngine(t, 1, steps), startVLLMEngine(t, 2, 0)
	f := startFleetIgnoring(t, 0, func(c *node.Config) {
		c.Engines = []string{a.declaration() + extra, b.declaration()}
		// Declared engines are probed every second: the default liveness
		// timeout (3 s) rides out two missed probes.
		c.Events.LivenessTimeout = 3 * time.Second
	}, goleak.IgnoreAnyFunction(zmqPubWriter))
	t.Cleanup(func() { a.stop(); b.stop() }) // before the fleet's leak check
	waitUntil(t, 10*time.Second, "two routable engines", func() bool { return len(f.cachedBlocks(seq(1, 16))) == 2 })
	waitSubscribed(t, a, b)
	return f, a, b
}

// waitSubscribed waits until a subscription reached each engine's PUB
// socket. A batch published before that is lost to the subscriber until
// a later batch shows the gap: the tests' first batches must go out live.
func waitSubscribed(t *testing.T, engines ...*vllmEngine) {
	t.Helper()
	for _, e := range engines {
		waitUntil(t, 10*time.Second, "a subscriber to engine "+e.worker+"'s events", func() bool {
			topics, err := e.srv.KVEventTopics(0)
			return err == nil && len(topics) > 0
		})
	}
}

// indexed waits until the node finds every prompt's blocks on e.
func (f *fleet) indexed(e *vllmEngine, prompts ...[]int) {
	f.t.Helper()
	waitUntil(f.t, 10*time.Second, "the engine's blocks in the node's index", func() bool {
		for _, p := range prompts {
			if f.cachedBlocks(p)[e.worker] != len(p)/16 {
				return false
			}
		}
		return true
	})
}

// routedTo checks that three requests sharing p's prefix go to e.
func (f *fleet) routedTo(e *vllmEngine, p []int) {
	f.t.Helper()
	for i := range 3 {
		if got, _ := f.complete(append(append([]int(nil), p...), seq(90000+100*i, 20)...)); got != e.worker {
			f.t.Fatalf("request %d with the prefix went to %s, not to the engine caching it (%s)", i, got, e.worker)
		}
	}
}

// withheld has e cache p while its batch goes to the replay buffer only,
// as a publisher does when a slow subscriber's high-water mark drops the
// live message; e's next batch, live, then shows the gap.
func withheld(t *testing.T, e *vllmEngine, p, next []int) {
	t.Helper()
	if err := e.srv.DropBatches(0, 1); err != nil {
		t.Fatal(err)
	}
	e.cache(t, p)
	e.cache(t, next)
}

// metric sums a family's samples on the node's /metrics page whose
// labels contain label.
func (f *fleet) metric(family, label string) float64 {
	f.t.Helper()
	var sum float64
	for _, line := range strings.Split(string(f.scrape()), "\n") {
		name, rest, _ := strings.Cut(line, " ")
		if n, labels, _ := strings.Cut(name, "{"); n == family && strings.Contains(labels, label) {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				f.t.Fatalf("%s: %v", line, err)
			}
			sum += v
		}
	}
	return sum
}

// depth is how many leading blocks of tokens the engine holds, from its
// own cache.
func (e *vllmEngine) depth(t *testing.T, tokens []int) int {
	t.Helper()
	dump, err := e.srv.Dump(0)
	if err != nil {
		t.Fatal(err)
	}
	seqOf := map[routing.EngineHash]routing.SeqHash{}
	held := map[routing.SeqHash]bool{}
	for _, ev := range dump {
		b := ev.Blocks[0]
		h := routing.SeqHash(b.Local)
		if ev.HasParent {
			h = routing.Chain(seqOf[ev.Parent], b.Local)
		}
		seqOf[b.Engine], held[h] = h, true
	}
	u := make([]uint32, len(tokens))
	for i, v := range tokens {
		u[i] = uint32(v)
	}
	hashes, err := routing.BlockHashes(nil, u, 16, routing.Seed("", ""))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for n < len(hashes) && held[hashes[n]] {
		n++
	}
	return n
}
