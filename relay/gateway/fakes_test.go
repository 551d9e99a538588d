package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/relay/consumer"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
)

// fakeNode is a router node: it answers completions (JSON, or SSE when the
// body asks to stream), binds sessions named by X-Session-Id, and serves
// the session, readiness and model endpoints.
type fakeNode struct {
	name   string
	srv    *httptest.Server
	status atomic.Int32 // completion status; 0 means 200
	ready  atomic.Bool
	// gate, if set, is received from between SSE events.
	gate chan struct{}

	mu       sync.Mutex
	bound    map[string]bool
	requests []recorded
	models   []string
}

// recorded is one completion a fake node received.
type recorded struct {
	path, body string
	header     http.Header
}

func newFakeNode(t *testing.T, name string, models ...string) *fakeNode {
	t.Helper()
	n := &fakeNode{name: name, bound: map[string]bool{}, models: models}
	n.ready.Store(true)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", n.complete)
	mux.HandleFunc("POST /v1/completions", n.complete)
	mux.HandleFunc("GET /v1/sessions/{id}", n.getSession)
	mux.HandleFunc("DELETE /v1/sessions/{id}", n.deleteSession)
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		if !n.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("GET /v1/models", n.listModels)
	n.srv = httptest.NewServer(mux)
	t.Cleanup(n.srv.Close)
	return n
}

func (n *fakeNode) complete(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	n.mu.Lock()
	n.requests = append(n.requests, recorded{path: r.URL.Path, body: string(body), header: r.Header.Clone()})
	if s := r.Header.Get("X-Session-Id"); s != "" {
		n.bound[s] = true
	}
	n.mu.Unlock()
	w.Header().Set("X-Kvrouter-Worker", n.name+"/0")
	if st := n.status.Load(); st != 0 {
		http.Error(w, `{"error":{"message":"down"}}`, int(st))
		return
	}
	if strings.Contains(string(body), `"stream":true`) {
		n.stream(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"cmpl","object":"text_completion","served_by":%q}`, n.name)
}

// sseEvents is what a fake node streams.
var sseEvents = []string{"data: {\"choices\":[{\"text\":\"a\"}]}\n\n", "data: {\"choices\":[{\"text\":\"b\"}]}\n\n", "data: [DONE]\n\n"}

func (n *fakeNode) stream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for i, ev := range sseEvents {
		if i > 0 && n.gate != nil {
			<-n.gate
		}
		_, _ = io.WriteString(w, ev)
		w.(http.Flusher).Flush()
	}
}

func (n *fakeNode) getSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	n.mu.Lock()
	ok := n.bound[id]
	n.mu.Unlock()
	if !ok {
		http.Error(w, `{"error":{"code":"session_not_found"}}`, http.StatusNotFound)
		return
	}
	fmt.Fprintf(w, `{"id":%q,"object":"session","engine":"%s/0","engine_id":1,"version":7}`, id, n.name)
}

func (n *fakeNode) deleteSession(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	delete(n.bound, r.PathValue("id"))
	n.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (n *fakeNode) listModels(w http.ResponseWriter, _ *http.Request) {
	var parts []string
	for _, m := range n.models {
		parts = append(parts, fmt.Sprintf(`{"id":%q,"object":"model","owned_by":"kvrouter"}`, m))
	}
	fmt.Fprintf(w, `{"object":"list","data":[%s]}`, strings.Join(parts, ","))
}

// count returns the number of completions the node received.
func (n *fakeNode) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.requests)
}

// last returns the last completion the node received.
func (n *fakeNode) last() recorded {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.requests[len(n.requests)-1]
}

// isBound reports whether the node holds a binding of id.
func (n *fakeNode) isBound(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.bound[id]
}

// deleteBinding drops a binding of id.
func (n *fakeNode) deleteBinding(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.bound, id)
}

// bind binds a session on the node.
func (n *fakeNode) bind(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.bound[id] = true
}

// fakeRemote is a RemoteIndex answering fixed results per DC.
type fakeRemote struct {
	mu      sync.Mutex
	results []consumer.Result
}

func (f *fakeRemote) set(rs ...consumer.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.results = rs
}

func (f *fakeRemote) Query(dst []consumer.Result, d producer.Domain, hs []routing.SeqHash, _ time.Time) []consumer.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.results {
		r.Pool.Domain = d
		r.Depth = min(r.Depth, len(hs))
		dst = append(dst, r)
	}
	return dst
}

// lane builds a ready, fresh lane result of dc at depth with engines.
func lane(dc string, depth int) consumer.Result {
	return consumer.Result{Pool: producer.PoolID{DC: dc}, Ready: true, Depth: depth,
		Load: producer.Load{Engines: 4}}
}

// fixedDepth is a LocalIndex answering a fixed depth.
type fixedDepth int

func (d fixedDepth) Depth(_ string, hs []routing.SeqHash) int { return min(int(d), len(hs)) }

// dcHarness is one DC: its nodes, its gateway and the gateway's server.
type dcHarness struct {
	name   string
	nodes  []*fakeNode
	gw     *Gateway
	srv    *httptest.Server
	remote *fakeRemote
	local  fixedDepth
}

// federation builds two DCs, "dc-a" and "dc-b", each with one node, their
// gateways wired to each other with rtt, and HTTP session locators.
// tweak may edit each Config before New.
func federation(t *testing.T, rtt time.Duration, tweak func(*Config)) (a, b *dcHarness) {
	t.Helper()
	a, b = &dcHarness{name: "dc-a", remote: &fakeRemote{}}, &dcHarness{name: "dc-b", remote: &fakeRemote{}}
	var handlers [2]atomic.Pointer[http.Handler]
	for i, h := range []*dcHarness{a, b} {
		h.nodes = []*fakeNode{newFakeNode(t, h.name+"-n0", "m-"+h.name, "shared")}
		h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			(*handlers[i].Load()).ServeHTTP(w, r)
		}))
		t.Cleanup(h.srv.Close)
	}
	for i, pair := range [][2]*dcHarness{{a, b}, {b, a}} {
		self, peer := pair[0], pair[1]
		remotes := []Remote{{DC: peer.name, URL: peer.srv.URL, WANRTT: rtt}}
		cfg := Config{DC: self.name, Nodes: []string{self.nodes[0].srv.URL}, Remotes: remotes,
			Pools: []Pool{{Model: "shared", BlockSize: 4}}, RemoteIndex: self.remote,
			LocalIndex: &self.local, Now: time.Now, HealthInterval: 50 * time.Millisecond}
		cfg.Sessions = NewHTTPLocator(remotes, NewHomes("dc-a", "dc-b"), nil, time.Now, time.Nanosecond, time.Nanosecond)
		if tweak != nil {
			tweak(&cfg)
		}
		gw, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		self.gw = gw
		h := gw.Handler()
		handlers[i].Store(&h)
	}
	return a, b
}

// sessionHomed returns a session id whose home is dc.
func sessionHomed(t *testing.T, dc string) string {
	t.Helper()
	h := NewHomes("dc-a", "dc-b")
	for i := range 1000 {
		if id := fmt.Sprintf("sess-%d", i); h.Home(id) == dc {
			return id
		}
	}
	t.Fatal("no session homed in " + dc)
	return ""
}

// costly makes one prompt token worth 1 ms, so that small test prompts
// can beat a WAN round trip.
func costly(c *Config) { c.Policy.PrefillCostPerTokenMs = 1 }

// post sends a completion to a gateway and returns status, headers, body.
func post(t *testing.T, url, path, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// tokensBody is a completions body with n token ids.
func tokensBody(model string, n int, stream bool) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint(i + 1)
	}
	return fmt.Sprintf(`{"model":%q,"prompt":[%s],"stream":%v}`, model, strings.Join(ids, ","), stream)
}

// errorBody decodes an OpenAI error body.
func errorBody(t *testing.T, body string) (msg, typ, code string, param *string) {
	t.Helper()
	var e oaiedge.ErrorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	return e.Error.Message, e.Error.Type, code, e.Error.Param
}

// newGateway builds a gateway on cfg with a real clock.
func newGateway(t *testing.T, cfg Config) *Gateway {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// postHandler sends a completion straight to g's handler.
func postHandler(t *testing.T, g *Gateway, path, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	g.Handler().ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.String()
}

// Best answers as the consumer does, by its definition. The objective's
// view points into the results, which therefore live on the heap: they
// are recycled, so that the decision benchmark counts the gateway's
// allocations only.
func (f *fakeRemote) Best(d producer.Domain, hs []routing.SeqHash, now time.Time, o consumer.Objective, minGain float64) (consumer.Result, float64, bool) {
	buf := resultBufs.Get().(*[]consumer.Result)
	defer resultBufs.Put(buf)
	*buf = f.Query((*buf)[:0], d, hs, now)
	return consumer.BestOf(*buf, o, minGain)
}

// resultBufs recycles fakeRemote.Best's results.
var resultBufs = sync.Pool{New: func() any { return new([]consumer.Result) }}
