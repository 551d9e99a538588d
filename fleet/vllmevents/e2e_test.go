package vllmevents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/mocker/server"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

const e2eBlock = 16

// mockEngine is a mocker in the vLLM-wire mode serving HTTP on loopback.
type mockEngine struct {
	srv    *server.Server
	base   string
	cancel context.CancelFunc
	done   chan error
}

// startEngine runs a mocker; pub and replay are the endpoints to bind
// (port 0 for any).
func startEngine(t *testing.T, id uint64, pub, replay string) *mockEngine {
	t.Helper()
	cfg := server.Config{EngineID: id, Protocol: server.ProtocolVLLM, KVEventsEndpoint: pub, ReplayEndpoint: replay,
		Engine: mocker.Config{Model: "m", BlockSize: e2eBlock, NumBlocks: 48, SpeedUp: 200},
		Rand:   rand.New(rand.NewPCG(id, 7))}
	srv, err := server.New(cfg, nil, testLog())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &mockEngine{srv: srv, base: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- srv.Serve(ctx, ln) }()
	waitFor(t, "engine health", func() bool {
		resp, err := http.Get(e.base + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return e
}

func (e *mockEngine) stop(t *testing.T) {
	e.cancel()
	if err := <-e.done; err != nil {
		t.Error(err)
	}
}

// complete sends one completion with the given prompt token ids.
func (e *mockEngine) complete(t *testing.T, tokens []uint32) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "m", "prompt": "x", "max_tokens": 2,
		"kvrouter": map[string]any{"token_ids": tokens}})
	resp, err := http.Post(e.base+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("completion: status %d", resp.StatusCode)
	}
}

// prompts draws n prompts from a few shared prefixes, so that blocks are
// shared, chained across batches and evicted (the engine holds 48).
func prompts(r *rand.Rand, n int) [][]uint32 {
	var roots [4][]uint32
	for i := range roots {
		roots[i] = randTokens(r, e2eBlock*(2+i))
	}
	out := make([][]uint32, n)
	for i := range out {
		p := append([]uint32(nil), roots[r.IntN(len(roots))]...)
		out[i] = append(p, randTokens(r, e2eBlock*(1+r.IntN(4))+r.IntN(e2eBlock))...)
	}
	return out
}

func randTokens(r *rand.Rand, n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = r.Uint32N(50000)
	}
	return t
}

// equal reports whether idx holds for w exactly the engine's cache: every
// cached block found at its full depth, and no other block.
func equal(idx *index.Exact, w routing.Worker, truth []routing.Event) error {
	// Dump lists parents before children, one block per event.
	parent := map[routing.SeqHash]routing.SeqHash{}
	seqOf := map[routing.EngineHash]routing.SeqHash{}
	for _, ev := range truth {
		b := ev.Blocks[0]
		seq, up := routing.SeqHash(b.Local), routing.SeqHash(0)
		if ev.HasParent {
			up = seqOf[ev.Parent]
			seq = routing.Chain(up, b.Local)
		}
		seqOf[b.Engine], parent[seq] = seq, up
	}
	for seq := range parent {
		chain := []routing.SeqHash{seq}
		for p := parent[seq]; p != 0; p = parent[p] {
			chain = append([]routing.SeqHash{p}, chain...)
		}
		var found int32
		for _, m := range idx.FindMatches(chain, nil) {
			if m.Worker == w {
				found = m.Device
			}
		}
		if int(found) != len(chain) {
			return fmt.Errorf("block %#x at depth %d: index has %d", uint64(seq), len(chain), found)
		}
	}
	if got := idx.Stats().Pairs; got != len(parent) {
		return fmt.Errorf("index holds %d blocks, engine %d", got, len(parent))
	}
	return nil
}

func waitEqual(t *testing.T, idx *index.Exact, e *mockEngine, w routing.Worker) {
	t.Helper()
	var last error
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		truth, err := e.srv.Dump(0)
		if err != nil {
			t.Fatal(err)
		}
		if last = equal(idx, w, truth); last == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("index never matched the engine: %v (index %+v)", last, idx.Stats())
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testLog() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// runSubscriber follows e's rank 0 into idx until the test ends.
func runSubscriber(t *testing.T, e *mockEngine, idx *index.Exact, w routing.Worker) *Subscriber {
	t.Helper()
	pub, replay, err := e.srv.KVEventsEndpoints(0)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := New(Config{Worker: w, Endpoint: pub, ReplayEndpoint: replay, BlockSize: e2eBlock,
		Retry: 50 * time.Millisecond}, idx, nil, testLog())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = sub.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "subscriber connected", func() bool { return sub.Stats().Connects > 0 })
	return sub
}

// TestEndToEndMockerToIndex drives a vLLM-wire mocker with shared-prefix
// prompts and checks that the index equals the engine's cache; then the
// publisher goes away while the engine keeps working, and one replay
// repairs the gap.
func TestEndToEndMockerToIndex(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	e := startEngine(t, 7, "tcp://127.0.0.1:0", "tcp://127.0.0.1:0")
	defer e.stop(t)
	w := routing.Worker{ID: 7}
	idx := index.NewExact()
	sub := runSubscriber(t, e, idx, w)
	for _, p := range prompts(r, 30) {
		e.complete(t, p)
	}
	waitEqual(t, idx, e, w)
	before := sub.Stats()

	if err := e.srv.ClosePublisher(0); err != nil {
		t.Fatal(err)
	}
	for _, p := range prompts(r, 10) {
		e.complete(t, p) // published while nobody listens: the replay after the reconnection brings them
	}
	if err := e.srv.OpenPublisher(0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "reconnect", func() bool { return sub.Stats().Connects > before.Connects })
	waitEqual(t, idx, e, w)
	for _, p := range prompts(r, 10) {
		e.complete(t, p)
	}
	waitEqual(t, idx, e, w)
	after := sub.Stats()
	if n := after.Replays - before.Replays; n != 1 {
		t.Errorf("replays after the publisher came back: %d, want 1 (%+v → %+v)", n, before, after)
	}
	if after.Rejected != 0 {
		t.Errorf("rejected %d inputs", after.Rejected)
	}
}

// TestEndToEndEngineRestart replaces the engine by a new incarnation on
// the same endpoints: its sequence starts again at 0, which clears the
// worker instead of counting a gap.
func TestEndToEndEngineRestart(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	e := startEngine(t, 9, "tcp://127.0.0.1:0", "tcp://127.0.0.1:0")
	w := routing.Worker{ID: 9}
	idx := index.NewExact()
	sub := runSubscriber(t, e, idx, w)
	for _, p := range prompts(r, 20) {
		e.complete(t, p)
	}
	waitEqual(t, idx, e, w)
	pub, replay, _ := e.srv.KVEventsEndpoints(0)
	e.stop(t)
	e2 := startEngine(t, 9, pub, replay)
	defer e2.stop(t)
	for _, p := range prompts(r, 5) {
		e2.complete(t, p)
	}
	waitEqual(t, idx, e2, w)
	st := sub.Stats()
	if st.Restarts != 1 || st.Gaps != 0 {
		t.Errorf("restarts %d gaps %d, want 1 and 0", st.Restarts, st.Gaps)
	}
}
