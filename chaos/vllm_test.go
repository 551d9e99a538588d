package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/kvrouter/kvrouter/fleet/declared"
	"github.com/kvrouter/kvrouter/internal/dnstest"
	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/mocker/server"
	"github.com/kvrouter/kvrouter/routing"
)

// vllmEngine is a simulated engine speaking vLLM's wire (OpenAI HTTP,
// ZMQ/msgpack KV events with a replay socket, vllm:* metrics), with no
// kvrouter code between it and the router.
type vllmEngine struct {
	srv           *server.Server
	url, pub, rpl string
	cancel        context.CancelFunc
	done          chan error
	worker        routing.Worker
	httpPort      int
}

func startVLLMEngine(t *testing.T, id uint64) *vllmEngine {
	return startVLLMEngineAt(t, id, freeAddr(t), "tcp://"+freeAddr(t), "tcp://"+freeAddr(t))
}

// startVLLMEngineAt runs an engine on the given HTTP, publisher and replay
// addresses.
func startVLLMEngineAt(t *testing.T, id uint64, httpAddr, pub, replay string) *vllmEngine {
	t.Helper()
	cfg := server.Config{EngineID: id, Protocol: server.ProtocolVLLM,
		KVEventsEndpoint: pub, ReplayEndpoint: replay,
		Engine: mocker.Config{Model: mocker.DefaultModel, BlockSize: blockSize, NumBlocks: 4096, SpeedUp: 100},
		Rand:   rand.New(rand.NewPCG(id, 11))}
	srv, err := server.New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &vllmEngine{srv: srv, url: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan error, 1),
		httpPort: ln.Addr().(*net.TCPAddr).Port}
	e.worker = routing.Worker{ID: declared.EngineID(e.url)}
	go func() { e.done <- srv.Serve(ctx, ln) }()
	if e.pub, e.rpl, err = srv.KVEventsEndpoints(0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-e.done })
	return e
}

func (e *vllmEngine) declaration() string {
	return fmt.Sprintf("url=%s,block-size=%d,kv-events=%s,replay=%s", e.url, blockSize, e.pub, e.rpl)
}

// startNodeProcess runs `kvrouter node` with args and returns its base URL.
func startNodeProcess(t *testing.T, args ...string) string {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(binary, append([]string{"node", "--http-addr", addr, "--nats-listen", freeAddr(t)}, args...)...)
	logf, err := os.CreateTemp(t.TempDir(), "node-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("node log:\n%s", b)
		}
	})
	return "http://" + addr
}

// post sends a completion with token ids and returns the serving engine.
func post(t *testing.T, base string, tokens []uint32) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "prompt": tokens, "max_tokens": 2})
	resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("completion: status %d", resp.StatusCode)
	}
	return resp.Header.Get("X-Kvrouter-Worker")
}

// explainDepths asks the node for each engine's cached prefix of tokens;
// nil while the node does not answer.
func explainDepths(t *testing.T, base string, tokens []uint32) map[string]int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "prompt": tokens})
	resp, err := http.Post(base+"/v1/route/explain", "application/json", bytes.NewReader(body))
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
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	m := map[string]int{}
	for _, e := range out.Engines {
		m[e.Engine] = e.Cached
	}
	return m
}

// trueDepth is the prefix of tokens in the engine's own cache, in blocks.
func (e *vllmEngine) trueDepth(t *testing.T, tokens []uint32) int {
	t.Helper()
	dump, err := e.srv.Dump(0)
	if err != nil {
		t.Fatal(err)
	}
	seqOf := map[routing.EngineHash]routing.SeqHash{}
	held := map[routing.SeqHash]bool{}
	for _, ev := range dump {
		b := ev.Blocks[0]
		seq := routing.SeqHash(b.Local)
		if ev.HasParent {
			seq = routing.Chain(seqOf[ev.Parent], b.Local)
		}
		seqOf[b.Engine], held[seq] = seq, true
	}
	hashes, err := routing.BlockHashes(nil, tokens, blockSize, routing.Seed("", ""))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for n < len(hashes) && held[hashes[n]] {
		n++
	}
	return n
}

// metric reads the sum of a counter family from the node's /metrics.
func metric(t *testing.T, base, family string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, family+" ") || strings.HasPrefix(line, family+"{") {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			sum += v
		}
	}
	return sum
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tokensFrom(r *rand.Rand, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = r.Uint32N(50000)
	}
	return out
}

// runVLLMScenario drives a node process fronting three vLLM-wire engines:
// a shared prefix lands on the engine that caches it; the engine's
// publisher goes away and comes back with a sequence gap, which one replay
// repairs; and the node's index then holds exactly the engine's cache for
// every prompt sent.
func runVLLMScenario(t *testing.T, base string, engines []*vllmEngine) {
	r := rand.New(rand.NewPCG(5, 8))
	eventually(t, "three engines routable", func() bool { return len(explainDepths(t, base, tokensFrom(r, blockSize))) == 3 })
	root := tokensFrom(r, 8*blockSize)
	var sent [][]uint32
	send := func(i int) string {
		p := append(append([]uint32(nil), root...), tokensFrom(r, blockSize+i%blockSize)...)
		sent = append(sent, p)
		return post(t, base, p)
	}
	owner := send(0)
	var byWorker = map[string]*vllmEngine{}
	for _, e := range engines {
		byWorker[e.worker.String()] = e
	}
	cache := byWorker[owner]
	if cache == nil {
		t.Fatalf("served by %q, not a declared engine", owner)
	}
	eventually(t, "the first prompt's blocks indexed", func() bool { return explainDepths(t, base, root)[owner] == 8 })
	for i := 1; i < 10; i++ {
		if got := send(i); got != owner {
			t.Fatalf("request %d with the shared prefix went to %s, not to the engine caching it (%s)", i, got, owner)
		}
	}

	replays := metric(t, base, "kvrouter_vllmevents_replays_total")
	if err := cache.srv.ClosePublisher(0); err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 15; i++ {
		send(i) // published while nobody listens: a gap the replay must fill
	}
	if err := cache.srv.OpenPublisher(0); err != nil {
		t.Fatal(err)
	}
	for i := 15; i < 20; i++ {
		send(i)
	}
	eventually(t, "the node's index to equal every engine's cache", func() bool { return indexMatches(t, base, engines, sent) })
	if n := metric(t, base, "kvrouter_vllmevents_replays_total") - replays; n != 1 {
		t.Fatalf("%v replays after the publisher's gap, want exactly 1", n)
	}
}

// indexMatches reports whether the node's index holds exactly each
// engine's true cache for every prompt: the checker's index invariant
// after a resync.
func indexMatches(t *testing.T, base string, engines []*vllmEngine, prompts [][]uint32) bool {
	t.Helper()
	for _, p := range prompts {
		depths := explainDepths(t, base, p)
		for _, e := range engines {
			if depths[e.worker.String()] != e.trueDepth(t, p) {
				return false
			}
		}
	}
	return true
}

// TestVLLMEnginesDeclaredStatically runs the scenario with the engines
// given as --engine entries.
func TestVLLMEnginesDeclaredStatically(t *testing.T) {
	engines := []*vllmEngine{startVLLMEngine(t, 1), startVLLMEngine(t, 2), startVLLMEngine(t, 3)}
	var args []string
	for _, e := range engines {
		args = append(args, "--engine", e.declaration())
	}
	runVLLMScenario(t, startNodeProcess(t, args...), engines)
}

// TestVLLMEnginesFoundByDNS runs the scenario with the engines found by
// DNS, as the pods of a headless Service are: three addresses (loopback
// aliases here) with the same ports, from a DNS server the node is
// pointed at.
func TestVLLMEnginesFoundByDNS(t *testing.T) {
	httpPort, pubPort, replayPort := port(t), port(t), port(t)
	hosts := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	var engines []*vllmEngine
	for i, h := range hosts {
		engines = append(engines, startVLLMEngineAt(t, uint64(i+1), net.JoinHostPort(h, httpPort),
			"tcp://"+net.JoinHostPort(h, pubPort), "tcp://"+net.JoinHostPort(h, replayPort)))
	}
	dnsAddr := dnsServer(t, "vllm.test.", hosts)
	base := startNodeProcess(t, "--engine-dns-server", dnsAddr, "--engine-dns",
		fmt.Sprintf("name=vllm.test,port=%s,block-size=%d,kv-events-port=%s,replay-port=%s", httpPort, blockSize, pubPort, replayPort))
	runVLLMScenario(t, base, engines)
}

// port is a free loopback port number.
func port(t *testing.T) string {
	_, p, _ := net.SplitHostPort(freeAddr(t))
	return p
}

// dnsServer answers A questions for name with addrs on loopback UDP and
// returns its address.
func dnsServer(t *testing.T, name string, addrs []string) string {
	return dnstest.Serve(t, func(q dns.Question) []dns.RR {
		var out []dns.RR
		if q.Name != name || q.Qtype != dns.TypeA {
			return nil
		}
		for _, a := range addrs {
			out = append(out, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(a)})
		}
		return out
	})
}
