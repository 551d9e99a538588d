package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/mocker"
)

// zmqPubWriter is the goroutine zmq4 v0.17.0 leaves behind every closed
// PUB socket (see vllmPub.close).
const zmqPubWriter = "github.com/go-zeromq/zmq4.(*pubMWriter).run"

// vllmHarness is a mocker in the vLLM-wire mode on loopback, without NATS.
type vllmHarness struct {
	srv  *Server
	base string
}

func startVLLM(t *testing.T, mutate func(*Config)) *vllmHarness {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t, goleak.IgnoreAnyFunction(zmqPubWriter)) })
	cfg := Config{EngineID: 5, Protocol: ProtocolVLLM, KVEventsEndpoint: "tcp://127.0.0.1:0",
		ReplayEndpoint: "tcp://127.0.0.1:0", Engine: mocker.Config{Model: testModel, BlockSize: testBlock, NumBlocks: 64, SpeedUp: 100},
		Rand: rand.New(rand.NewPCG(1, 2))}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	h := &vllmHarness{srv: srv, base: "http://" + ln.Addr().String()}
	waittest.Until(t, 10*time.Second, "the engine is healthy", func() bool {
		code, _ := h.get(t, "/health")
		return code == 200
	})
	return h
}

// subscriptions returns the topics rank 0's PUB socket has subscribers
// for (Server.KVEventTopics).
func (h *vllmHarness) subscriptions() []string {
	topics, _ := h.srv.KVEventTopics(0)
	return topics
}

func (h *vllmHarness) get(t *testing.T, path string) (int, string) {
	resp, err := http.Get(h.base + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (h *vllmHarness) complete(t *testing.T, tokens []int64) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"prompt":%s,"max_tokens":2}`, testModel, intsJSON(tokens))
	resp, err := http.Post(h.base+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func intsJSON(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(s, ",") + "]"
}

// TestVLLMModeWire checks what a vLLM consumer relies on: three-frame
// messages with an 8-byte sequence from 0, array-layout batches whose
// stored events carry 32-byte hashes and the blocks' tokens, and a replay
// that resends the same bytes and ends with seq -1.
func TestVLLMModeWire(t *testing.T) {
	h := startVLLM(t, nil)
	pub, replay, err := h.srv.KVEventsEndpoints(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub := zmq4.NewSub(ctx, zmq4.WithLogger(zmqLogger))
	defer sub.Close()
	_ = sub.SetOption(zmq4.OptionSubscribe, "")
	if err := sub.Dial(pub); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 10*time.Second, "the subscription reached the publisher", func() bool {
		return len(h.subscriptions()) > 0
	})
	h.complete(t, tokenRange(0, 3*testBlock+5))
	msg, err := sub.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Frames) != 3 || len(msg.Frames[1]) != 8 || binary.BigEndian.Uint64(msg.Frames[1]) != 0 {
		t.Fatalf("frames %q", msg.Frames)
	}
	var batch []any
	if err := msgpack.Unmarshal(msg.Frames[2], &batch); err != nil || len(batch) != 3 {
		t.Fatalf("batch %v: %v", batch, err)
	}
	ev := batch[1].([]any)[0].([]any)
	hashes := ev[1].([]any)
	if ev[0] != "BlockStored" || len(hashes) != 3 || len(hashes[0].([]byte)) != 32 || ev[2] != nil ||
		len(ev[3].([]any)) != 3*testBlock || fmt.Sprint(ev[4]) != fmt.Sprint(testBlock) || ev[6] != "GPU" {
		t.Fatalf("stored event %v", ev)
	}
	got := replayAll(t, ctx, replay, 0)
	if len(got) != 1 || string(got[0]) != string(msg.Frames[2]) {
		t.Fatalf("replay gave %d batches, want the published one", len(got))
	}
}

// replayAll sends a replay request from seq and collects payloads until
// the end marker.
func replayAll(t *testing.T, ctx context.Context, ep string, from uint64) [][]byte {
	t.Helper()
	out, err := replay(ctx, ep, from)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// replay is replayAll's request, which fails when ctx ends first.
func replay(ctx context.Context, ep string, from uint64) ([][]byte, error) {
	d := zmq4.NewDealer(ctx, zmq4.WithLogger(zmqLogger))
	defer d.Close()
	if err := d.Dial(ep); err != nil {
		return nil, err
	}
	if err := d.SendMulti(zmq4.NewMsgFrom([]byte{}, binary.BigEndian.AppendUint64(nil, from))); err != nil {
		return nil, err
	}
	var out [][]byte
	for {
		m, err := d.Recv()
		if err != nil || len(m.Frames) != 3 {
			return nil, fmt.Errorf("replay reply %q: %w", m.Frames, err)
		}
		if binary.BigEndian.Uint64(m.Frames[1]) == ^uint64(0) {
			return out, nil
		}
		out = append(out, m.Frames[2])
	}
}

// TestVLLMModeInterceptReplays: an intercepted request is answered only
// when the hook returns true, after it returns; nil answers all again.
func TestVLLMModeInterceptReplays(t *testing.T) {
	h := startVLLM(t, nil)
	h.complete(t, tokenRange(0, 2*testBlock))
	_, ep, _ := h.srv.KVEventsEndpoints(0)
	release := make(chan struct{})
	var seen []uint64
	var mu sync.Mutex
	err := h.srv.InterceptReplays(0, func(from uint64) bool {
		mu.Lock()
		seen = append(seen, from)
		first := len(seen) == 1
		mu.Unlock()
		if first {
			return false // silent
		}
		<-release // slow
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if got, err := replay(ctx, ep, 0); err == nil {
		t.Fatalf("a swallowed request was answered with %d batches", len(got))
	}
	h.complete(t, tokenRange(1000, 2*testBlock)) // published while the next request waits
	done := make(chan [][]byte, 1)
	go func() { done <- replayAll(t, context.Background(), ep, 0) }()
	waitHook := time.Now().Add(10 * time.Second)
	for mu.Lock(); len(seen) < 2; mu.Lock() {
		mu.Unlock()
		if time.Now().After(waitHook) {
			t.Fatal("the second request never reached the hook")
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Unlock()
	close(release)
	if got := <-done; len(got) != 2 {
		t.Fatalf("the delayed replay gave %d batches, want 2", len(got))
	}
	if err := h.srv.InterceptReplays(0, nil); err != nil {
		t.Fatal(err)
	}
	if got := replayAll(t, context.Background(), ep, 1); len(got) != 1 {
		t.Fatalf("replay from 1 gave %d batches, want 1", len(got))
	}
	if err := h.srv.InterceptReplays(1, nil); err == nil {
		t.Fatal("a rank the engine does not have was accepted")
	}
}

// TestVLLMModeReplayBound keeps only the newest batches.
func TestVLLMModeReplayBound(t *testing.T) {
	h := startVLLM(t, func(c *Config) { c.ReplayBufferSteps = 2 })
	for i := range 4 {
		h.complete(t, tokenRange(1000*i, 2*testBlock))
	}
	_, replay, _ := h.srv.KVEventsEndpoints(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got := replayAll(t, ctx, replay, 0); len(got) != 2 {
		t.Fatalf("replay kept %d batches, want 2", len(got))
	}
}

// TestVLLMModeHTTP checks the vLLM-named metrics and the plain endpoints.
func TestVLLMModeHTTP(t *testing.T) {
	h := startVLLM(t, nil)
	code, body := h.get(t, "/metrics")
	for _, want := range []string{`vllm:num_requests_running{engine="0",model_name="test-model"} 0`,
		"vllm:num_requests_waiting{", "vllm:gpu_cache_usage_perc{", "vllm:kv_cache_usage_perc{"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("/metrics %d lacks %q:\n%s", code, want, body)
		}
	}
	if code, body := h.get(t, "/v1/models"); code != 200 || !strings.Contains(body, testModel) {
		t.Fatalf("/v1/models %d %s", code, body)
	}
}
