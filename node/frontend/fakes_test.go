package frontend

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/routing"
)

// fakeRouter is a stateful stand-in for the decision path: it serves a set
// of models from one engine endpoint and records requests, progress
// callbacks and unbinds.
type fakeRouter struct {
	mu       sync.Mutex
	endpoint string
	models   map[string]bool
	err      error // returned by Route when set
	reqs     []dispatch.Request
	first    map[string]int
	output   map[string]int
	done     map[string][]error
	unbound  []string
	doneCh   chan string
	// lost, when set, is every decision's Lost context.
	lost context.Context
}

var _ dispatch.Router = (*fakeRouter)(nil)

func newFakeRouter(endpoint string, models ...string) *fakeRouter {
	f := &fakeRouter{endpoint: endpoint, models: map[string]bool{}, first: map[string]int{},
		output: map[string]int{}, done: map[string][]error{}, doneCh: make(chan string, 1024)}
	for _, m := range models {
		f.models[m] = true
	}
	return f
}

func (f *fakeRouter) Route(_ context.Context, r *dispatch.Request) (*dispatch.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, *r)
	if f.err != nil {
		return nil, f.err
	}
	if !f.models[r.Model] {
		return nil, fmt.Errorf("%w: %q", dispatch.ErrModelNotFound, r.Model)
	}
	id := r.ID
	d := dispatch.NewDecision(routing.Worker{ID: 7, Rank: 1}, f.endpoint,
		func() { f.mu.Lock(); f.first[id]++; f.mu.Unlock() },
		func(err error) {
			f.mu.Lock()
			f.done[id] = append(f.done[id], err)
			f.mu.Unlock()
			select {
			case f.doneCh <- id:
			default:
			}
		})
	d.Blocks, d.CachedBlocks = 4, 2
	d.WithOutputTokens(func(n int) { f.mu.Lock(); f.output[id] += n; f.mu.Unlock() })
	if f.lost != nil {
		d.WithLost(f.lost)
	}
	return d, nil
}

func (f *fakeRouter) Models() []dispatch.Model {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []dispatch.Model
	for m := range f.models {
		out = append(out, dispatch.Model{ID: m, Created: time.Unix(1700000000, 0), Engines: 1})
	}
	return out
}

func (f *fakeRouter) Unbind(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unbound = append(f.unbound, id)
	return nil
}

// lastRequest returns the last routed request.
func (f *fakeRouter) lastRequest(t *testing.T) dispatch.Request {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("no request was routed")
	}
	return f.reqs[len(f.reqs)-1]
}

// waitDone waits for a Done call, then until ts serves no request (the
// handler calls Done before it returns, so every Done call of the
// request, a second wrong one or a rerouted request's, has been made),
// and returns the request id and its Done errors.
func (f *fakeRouter) waitDone(t *testing.T, ts *testServer) (string, []error) {
	t.Helper()
	var id string
	select {
	case id = <-f.doneCh:
	case <-time.After(10 * time.Second):
		t.Fatal("Done was not called")
	}
	waittest.Until(t, 10*time.Second, "the request's handler returned (no request in flight)", func() bool {
		return testutil.ToFloat64(ts.metrics.Serving.InFlight) == 0
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	return id, append([]error(nil), f.done[id]...)
}

// fakeEngine is an OpenAI-compatible engine answering with fixed tokens,
// streamed or not, and recording what it received.
type fakeEngine struct {
	*httptest.Server
	tokens []string
	// delay is the pause before each streamed token.
	delay time.Duration
	// hang makes a stream stop after its first token until canceled.
	hang bool
	// flood makes a stream send large events until canceled.
	flood bool
	// cut makes a stream end in the middle of its second event.
	cut bool
	// status and errBody make the engine answer with an error.
	status  int
	errBody string
	// apiKey, when set, makes the engine answer 401 to requests without
	// "Authorization: Bearer <apiKey>", as vLLM started with --api-key does.
	apiKey string
	// https serves the engine over TLS with httptest's certificate.
	https bool

	mu     sync.Mutex
	bodies [][]byte
	ids    []string
	auths  []string
	// traceparents are the requests' traceparent headers.
	traceparents []string
	// headers are the requests' whole headers.
	headers  []http.Header
	canceled chan struct{}
}

func newFakeEngine(t *testing.T, configure func(*fakeEngine)) *fakeEngine {
	e := &fakeEngine{tokens: []string{"Hello", ",", " world"}, canceled: make(chan struct{}, 16)}
	if configure != nil {
		configure(e)
	}
	if e.https {
		e.Server = httptest.NewTLSServer(http.HandlerFunc(e.serve))
	} else {
		e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	}
	t.Cleanup(e.Close)
	return e
}

func (e *fakeEngine) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	e.mu.Lock()
	e.bodies = append(e.bodies, body)
	e.ids = append(e.ids, r.Header.Get("X-Request-Id"))
	e.auths = append(e.auths, r.Header.Get("Authorization"))
	e.traceparents = append(e.traceparents, r.Header.Get("Traceparent"))
	e.headers = append(e.headers, r.Header.Clone())
	e.mu.Unlock()
	if e.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+e.apiKey {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"Unauthorized"}`)
		return
	}
	if e.status != 0 {
		w.WriteHeader(e.status)
		_, _ = io.WriteString(w, e.errBody)
		return
	}
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(body, &req)
	chat := r.URL.Path == "/v1/chat/completions"
	if !req.Stream {
		e.answer(w, req.Model, chat)
		return
	}
	e.stream(w, r, req.Model, chat, req.StreamOptions.IncludeUsage)
}

func (e *fakeEngine) text() string {
	s := ""
	for _, t := range e.tokens {
		s += t
	}
	return s
}

const usageJSON = `{"prompt_tokens":3,"completion_tokens":%d,"total_tokens":%d}`

func (e *fakeEngine) answer(w http.ResponseWriter, model string, chat bool) {
	usage := fmt.Sprintf(usageJSON, len(e.tokens), 3+len(e.tokens))
	w.Header().Set("Content-Type", "application/json")
	if chat {
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":%s}`, model, e.text(), usage)
		return
	}
	fmt.Fprintf(w, `{"id":"c1","object":"text_completion","created":1,"model":%q,"choices":[{"index":0,"text":%q,"finish_reason":"stop","logprobs":null}],"usage":%s}`, model, e.text(), usage)
}

func (e *fakeEngine) stream(w http.ResponseWriter, r *http.Request, model string, chat, usage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	send := func(chunk string) bool {
		if _, err := fmt.Fprintf(w, "data: %s\n\n", chunk); err != nil {
			return false
		}
		w.(http.Flusher).Flush()
		return true
	}
	if chat {
		send(fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":%q,"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, model))
	}
	for i, tok := range e.tokens {
		time.Sleep(e.delay)
		if !send(e.chunk(model, chat, tok)) {
			return
		}
		if i == 0 && e.cut {
			_, _ = io.WriteString(w, `data: {"id":"c1","object":"text_completion","choi`)
			w.(http.Flusher).Flush()
			return
		}
		if i == 0 && (e.hang || e.flood) {
			e.waitCanceled(r, func() bool { return !e.flood || send(e.chunk(model, chat, string(make([]byte, 64<<10)))) })
			return
		}
	}
	if usage {
		send(fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":%q,"choices":[],"usage":`+usageJSON+`}`, model, len(e.tokens), 3+len(e.tokens)))
	}
	send("[DONE]")
}

func (e *fakeEngine) chunk(model string, chat bool, tok string) string {
	if chat {
		return fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":%q,"choices":[{"index":0,"delta":{"content":%q}}]}`, model, tok)
	}
	return fmt.Sprintf(`{"id":"c1","object":"text_completion","created":1,"model":%q,"choices":[{"index":0,"text":%q}]}`, model, tok)
}

// waitCanceled keeps calling step until the request is canceled or step
// fails, then reports the cancellation.
func (e *fakeEngine) waitCanceled(r *http.Request, step func() bool) {
	for r.Context().Err() == nil && step() {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Millisecond):
		}
	}
	<-r.Context().Done()
	e.canceled <- struct{}{}
}

func (e *fakeEngine) lastBody(t *testing.T) ([]byte, string) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.bodies) == 0 {
		t.Fatal("the engine received nothing")
	}
	return e.bodies[len(e.bodies)-1], e.ids[len(e.ids)-1]
}

// testServer is a frontend served on a loopback socket.
type testServer struct {
	URL     string
	srv     *Server
	metrics *metrics.Metrics
	client  *http.Client
}

// startFrontend serves a frontend for router with cfg until the test ends.
func startFrontend(t testing.TB, cfg Config, r dispatch.Router) *testServer {
	t.Helper()
	m := metrics.New()
	s, err := New(cfg, r, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, ln) }()
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &testServer{URL: "http://" + ln.Addr().String(), srv: s, metrics: m, client: &http.Client{Transport: tr}}
}

// setup starts an engine, a router serving model "m" from it, and a
// frontend.
func setup(t *testing.T, cfg Config, configure func(*fakeEngine)) (*testServer, *fakeRouter, *fakeEngine) {
	e := newFakeEngine(t, configure)
	r := newFakeRouter(e.URL, "m")
	return startFrontend(t, cfg, r), r, e
}
