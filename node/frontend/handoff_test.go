package frontend

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/routing"
)

// pairRouter is a stand-in for the decision path of a disaggregated
// model: each Route hands out the next prefill engine of its list with
// one decode engine, and records every hop's end.
type pairRouter struct {
	mu      sync.Mutex
	prefill []string // prefill endpoints, one per Route, the last repeated
	decode  string
	port    uint32 // the prefill engines' bootstrap port (0: vLLM's hand-off)
	reqs    []dispatch.Request
	hops    []error // each prefill hop's Done
	dones   []error // each decision's Done
	err     error   // returned by Route from the second call on, when set
}

var _ dispatch.Router = (*pairRouter)(nil)

func (p *pairRouter) Route(_ context.Context, r *dispatch.Request) (*dispatch.Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.reqs)
	p.reqs = append(p.reqs, *r)
	if n > 0 && p.err != nil {
		return nil, p.err
	}
	url := p.prefill[min(n, len(p.prefill)-1)]
	d := dispatch.NewDecision(routing.Worker{ID: 30, Rank: 0}, p.decode, nil, func(err error) {
		p.mu.Lock()
		p.dones = append(p.dones, err)
		p.mu.Unlock()
	})
	d.Prefill = dispatch.NewPrefillHop(routing.Worker{ID: routing.WorkerID(10 + n), Rank: 1}, url, p.port, func(err error) {
		p.mu.Lock()
		p.hops = append(p.hops, err)
		p.mu.Unlock()
	})
	d.Prefill.DPSize = 2
	return d, nil
}

func (p *pairRouter) Models() []dispatch.Model             { return nil }
func (p *pairRouter) Unbind(context.Context, string) error { return nil }
func (p *pairRouter) ends() (reqs []dispatch.Request, hops, dones []error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]dispatch.Request(nil), p.reqs...), append([]error(nil), p.hops...), append([]error(nil), p.dones...)
}

// fakePrefill is a prefill engine: vLLM's, answering a do_remote_decode
// request with kv_transfer_params, or SGLang's, answering once the decode
// engine fetched the room's cache (release). It records what it got.
type fakePrefill struct {
	*httptest.Server
	status int    // answer with this error status when set
	params string // the kv_transfer_params it answers with ("" for none)
	// release, when set, is waited on before answering (SGLang: the
	// decode engine has connected to the bootstrap server).
	release chan struct{}
	mu      sync.Mutex
	bodies  []map[string]any
}

func newFakePrefill(t *testing.T, configure func(*fakePrefill)) *fakePrefill {
	p := &fakePrefill{params: `{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"p-1","remote_block_ids":[4,5,6],"remote_host":"10.0.0.9","remote_port":5600,"tp_size":1}`}
	if configure != nil {
		configure(p)
	}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

func (p *fakePrefill) serve(w http.ResponseWriter, r *http.Request) {
	var m map[string]any
	_ = json.NewDecoder(r.Body).Decode(&m)
	p.mu.Lock()
	p.bodies = append(p.bodies, m)
	p.mu.Unlock()
	if p.release != nil {
		select {
		case <-p.release:
		case <-r.Context().Done():
			return
		}
	}
	if p.status != 0 {
		w.WriteHeader(p.status)
		_, _ = io.WriteString(w, `{"error":{"message":"prefill refused"}}`)
		return
	}
	params := p.params
	if params == "" {
		params = "null"
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"p","object":"text_completion","choices":[{"index":0,"text":"x","finish_reason":"length"}],"kv_transfer_params":%s}`, params)
}

func (p *fakePrefill) body(t *testing.T, i int) map[string]any {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if i >= len(p.bodies) {
		t.Fatalf("the prefill engine got %d requests, want more than %d", len(p.bodies), i)
	}
	return p.bodies[i]
}

// decoded is an engine's request body as JSON.
func decoded(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// disaggPost sends a streaming completion and returns the response.
func disaggPost(t *testing.T, ts *testServer, stream bool) *http.Response {
	t.Helper()
	body := fmt.Sprintf(`{"model":"m","prompt":[1,2,3,4],"max_tokens":8,"stream":%v,"stream_options":{"include_usage":true},"min_tokens":2}`, stream)
	resp, err := ts.client.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// closedURL is the URL of a port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// TestDisaggVLLMHandoff: the prefill hop is the client's request with
// max_tokens 1, not streamed, without stream options or minimum lengths,
// with do_remote_decode kv_transfer_params; the decode hop is the client's
// request with the prefill answer's kv_transfer_params unchanged, and
// streams to the client, which learns both engines.
func TestDisaggVLLMHandoff(t *testing.T) {
	pre := newFakePrefill(t, nil)
	dec := newFakeEngine(t, nil)
	r := &pairRouter{prefill: []string{pre.URL}, decode: dec.URL}
	ts := startFrontend(t, Config{}, r)
	resp := disaggPost(t, ts, true)
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(out), "data: [DONE]") {
		t.Fatalf("status %d body %s", resp.StatusCode, out)
	}
	if resp.Header.Get(WorkerHeader) != "30/0" || resp.Header.Get(PrefillWorkerHeader) != "10/1" {
		t.Fatalf("worker headers %q, %q", resp.Header.Get(WorkerHeader), resp.Header.Get(PrefillWorkerHeader))
	}
	p := pre.body(t, 0)
	kv, _ := p["kv_transfer_params"].(map[string]any)
	if p["max_tokens"] != 1.0 || p["stream"] != false || p["stream_options"] != nil || p["min_tokens"] != nil ||
		kv["do_remote_decode"] != true || kv["do_remote_prefill"] != false {
		t.Fatalf("prefill body %v", p)
	}
	raw, _ := dec.lastBody(t)
	d := decoded(t, raw)
	var want map[string]any
	_ = json.Unmarshal([]byte(pre.params), &want)
	if fmt.Sprint(d["kv_transfer_params"]) != fmt.Sprint(want) || d["max_tokens"] != 8.0 || d["stream"] != true || d["min_tokens"] != 2.0 {
		t.Fatalf("decode body %v", d)
	}
	_, hops, dones := r.ends()
	if len(hops) != 1 || hops[0] != nil || len(dones) != 1 || dones[0] != nil {
		t.Fatalf("hop ends %v, decision ends %v", hops, dones)
	}
}

// TestDisaggTransferParams: the hand-off of a prefill answer.
func TestDisaggTransferParams(t *testing.T) {
	for _, tc := range []struct {
		name, answer, want string
		err                bool
	}{
		{name: "params", answer: `{"choices":[{"finish_reason":"length"}],"kv_transfer_params":{"remote_engine_id":"e"}}`, want: `{"remote_engine_id":"e"}`},
		{name: "ended at its token", answer: `{"choices":[{"finish_reason":"stop"}],"kv_transfer_params":null}`, want: "null"},
		{name: "no connector", answer: `{"choices":[{"finish_reason":"length"}]}`, err: true},
		{name: "params not an object", answer: `{"choices":[],"kv_transfer_params":[1]}`, err: true},
		{name: "not JSON", answer: `<html>`, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := transferParams([]byte(tc.answer))
			if (err != nil) != tc.err || (err == nil && string(got) != tc.want) {
				t.Fatalf("transferParams = %s, %v", got, err)
			}
		})
	}
}

// TestDisaggSGLangHandoff: both hops carry the prefill engine's bootstrap
// host and port and one room naming the prefill rank, and run at once:
// the prefill engine answers only once the decode engine has connected
// (as SGLang's bootstrap server makes it), so hops sent one after the
// other would never finish.
func TestDisaggSGLangHandoff(t *testing.T) {
	release := make(chan struct{})
	pre := newFakePrefill(t, func(p *fakePrefill) { p.release = release })
	var once sync.Once
	dec := newFakeEngine(t, nil)
	decode := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(release) })
		dec.serve(w, r)
	}))
	t.Cleanup(decode.Close)
	r := &pairRouter{prefill: []string{pre.URL}, decode: decode.URL, port: 8998}
	ts := startFrontend(t, Config{}, r)
	resp := disaggPost(t, ts, true)
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(out), "data: [DONE]") {
		t.Fatalf("status %d body %s", resp.StatusCode, out)
	}
	p := pre.body(t, 0)
	raw, _ := dec.lastBody(t)
	d := decoded(t, raw)
	room, _ := p["bootstrap_room"].(float64)
	if p["bootstrap_host"] != "127.0.0.1" || p["bootstrap_port"] != 8998.0 || p["stream"] != false {
		t.Fatalf("prefill body %v", p)
	}
	if d["bootstrap_host"] != p["bootstrap_host"] || d["bootstrap_port"] != p["bootstrap_port"] || d["bootstrap_room"] != room || d["stream"] != true {
		t.Fatalf("decode body %v, prefill body %v", d, p)
	}
	_, hops, dones := r.ends()
	if len(hops) != 1 || hops[0] != nil || len(dones) != 1 || dones[0] != nil {
		t.Fatalf("hop ends %v, decision ends %v", hops, dones)
	}
}

// TestDisaggBootstrapRoom: a room is below 2^63 and names the rank modulo
// the engine's data-parallel size.
func TestDisaggBootstrapRoom(t *testing.T) {
	for _, tc := range []struct{ rank, size uint32 }{{0, 1}, {1, 2}, {47, 48}, {6, 7}, {3, 0}} {
		for _, r := range []uint64{0, 1, 1<<63 - 1, 1 << 63, 1<<64 - 1, 12345} {
			room := bootstrapRoom(tc.rank, tc.size, r)
			if room >= 1<<63 || (tc.size > 1 && room%uint64(tc.size) != uint64(tc.rank)) {
				t.Fatalf("rank %d of %d, draw %d: room %d", tc.rank, tc.size, r, room)
			}
		}
	}
}

// TestDisaggPrefillFailsOver: a prefill engine that cannot be reached is
// reported unreachable, and the request is routed again, marked as a
// failed prefill, to a pair whose prefill engine serves it.
func TestDisaggPrefillFailsOver(t *testing.T) {
	pre := newFakePrefill(t, nil)
	dec := newFakeEngine(t, nil)
	r := &pairRouter{prefill: []string{closedURL(t), pre.URL}, decode: dec.URL}
	ts := startFrontend(t, Config{}, r)
	resp := disaggPost(t, ts, true)
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(out), "data: [DONE]") {
		t.Fatalf("status %d body %s", resp.StatusCode, out)
	}
	reqs, hops, dones := r.ends()
	if len(reqs) != 2 || reqs[0].PrefillFailed || !reqs[1].PrefillFailed {
		t.Fatalf("routes %+v, want a second one marked PrefillFailed", reqs)
	}
	if len(hops) != 2 || !errors.Is(hops[0], dispatch.ErrEngineUnreachable) || hops[1] != nil {
		t.Fatalf("hop ends %v, want unreachable then success", hops)
	}
	if len(dones) != 2 || dones[0] == nil || dones[1] != nil {
		t.Fatalf("decision ends %v", dones)
	}
}

// TestDisaggPrefillFailsTwice: two prefill hops that fail end with a 502
// in the OpenAI shape, and nothing streamed.
func TestDisaggPrefillFailsTwice(t *testing.T) {
	for _, tc := range []struct {
		name string
		pre  func(*fakePrefill)
		want string
	}{
		{name: "engine error", pre: func(p *fakePrefill) { p.status = 500 }, want: "engine status 500"},
		{name: "no hand-off", pre: func(p *fakePrefill) { p.params = "" }, want: "kv_transfer_params"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pre := newFakePrefill(t, tc.pre)
			dec := newFakeEngine(t, nil)
			r := &pairRouter{prefill: []string{pre.URL}, decode: dec.URL}
			ts := startFrontend(t, Config{}, r)
			resp := disaggPost(t, ts, true)
			out, _ := io.ReadAll(resp.Body)
			var body struct {
				Error struct{ Message, Code string }
			}
			if resp.StatusCode != http.StatusBadGateway || json.Unmarshal(out, &body) != nil ||
				!strings.Contains(body.Error.Message, tc.want) || strings.Contains(string(out), "data:") {
				t.Fatalf("status %d body %s", resp.StatusCode, out)
			}
			dec.mu.Lock()
			n := len(dec.bodies)
			dec.mu.Unlock()
			if n != 0 {
				t.Fatalf("the decode engine got %d requests", n)
			}
			if _, hops, dones := r.ends(); len(hops) != 2 || len(dones) != 2 || dones[1] == nil {
				t.Fatalf("hop ends %v, decision ends %v", hops, dones)
			}
		})
	}
}

// TestDisaggNoPairLeft: a request whose prefill failed and that the
// router then refuses gets the router's refusal (503), nothing streamed.
func TestDisaggNoPairLeft(t *testing.T) {
	dec := newFakeEngine(t, nil)
	r := &pairRouter{prefill: []string{closedURL(t)}, decode: dec.URL,
		err: fmt.Errorf("%w: no prefill engine left", dispatch.ErrNoEngine)}
	ts := startFrontend(t, Config{}, r)
	resp := disaggPost(t, ts, true)
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(out), "no prefill engine left") {
		t.Fatalf("status %d body %s", resp.StatusCode, out)
	}
}

// TestDisaggDecodeRejectsHandoff: a decode engine that refuses the hand-off
// as invalid is the router's failure, not the client's: 502 with the
// engine's message.
func TestDisaggDecodeRejectsHandoff(t *testing.T) {
	pre := newFakePrefill(t, nil)
	dec := newFakeEngine(t, func(e *fakeEngine) {
		e.status, e.errBody = 400, `{"error":{"message":"invalid kv_transfer_params: remote_block_ids"}}`
	})
	r := &pairRouter{prefill: []string{pre.URL}, decode: dec.URL}
	ts := startFrontend(t, Config{}, r)
	resp := disaggPost(t, ts, true)
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(out), "refused the hand-off") ||
		!strings.Contains(string(out), "remote_block_ids") {
		t.Fatalf("status %d body %s", resp.StatusCode, out)
	}
}

// TestDisaggPrefillRefusesRequest: a prefill engine's 4xx is the client's
// error, relayed as the engine sent it, and not retried.
func TestDisaggPrefillRefusesRequest(t *testing.T) {
	pre := newFakePrefill(t, func(p *fakePrefill) { p.status = 400 })
	dec := newFakeEngine(t, nil)
	r := &pairRouter{prefill: []string{pre.URL}, decode: dec.URL}
	ts := startFrontend(t, Config{}, r)
	resp := disaggPost(t, ts, false)
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(out), "prefill refused") {
		t.Fatalf("status %d body %s", resp.StatusCode, out)
	}
	if reqs, _, _ := r.ends(); len(reqs) != 1 {
		t.Fatalf("%d routes, want 1", len(reqs))
	}
}

// TestDisaggSGLangPrefillFails: a concurrent prefill hop that fails cancels
// its decode hop, which waits for a cache that never comes, and the
// request is routed again; the client gets 502 with nothing streamed.
func TestDisaggSGLangPrefillFails(t *testing.T) {
	pre := newFakePrefill(t, func(p *fakePrefill) { p.status = 503 })
	var arrived, canceled atomic.Int32
	decode := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the cache never arrives
		canceled.Add(1)
	}))
	t.Cleanup(decode.Close)
	r := &pairRouter{prefill: []string{pre.URL}, decode: decode.URL, port: 8998}
	ts := startFrontend(t, Config{}, r)
	resp := disaggPost(t, ts, true)
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(string(out), "data:") {
		t.Fatalf("status %d body %s", resp.StatusCode, out)
	}
	// A decode hop may not have reached its engine before the prefill hop
	// failed; every one that did must be canceled.
	waittest.UntilNil(t, 5*time.Second, "every decode hop that reached its engine is canceled", func() error {
		if c, a := canceled.Load(), arrived.Load(); c != a {
			return fmt.Errorf("%d of %d canceled", c, a)
		}
		return nil
	})
	if _, hops, dones := r.ends(); len(hops) != 2 || len(dones) != 2 || dones[1] == nil {
		t.Fatalf("hop ends %v, decision ends %v", hops, dones)
	}
}

// TestDisaggStreamedUsage: a disaggregated stream's tokens are counted as
// an aggregated one's (the decode hop is the client's answer).
func TestDisaggStreamedUsage(t *testing.T) {
	pre := newFakePrefill(t, nil)
	dec := newFakeEngine(t, nil)
	r := &pairRouter{prefill: []string{pre.URL}, decode: dec.URL}
	ts := startFrontend(t, Config{}, r)
	resp := disaggPost(t, ts, true)
	sc := bufio.NewScanner(resp.Body)
	events := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			events++
		}
	}
	if want := len(dec.tokens) + 2; events != want { // tokens, usage, [DONE]
		t.Fatalf("%d events, want %d", events, want)
	}
}
