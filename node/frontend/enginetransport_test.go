package frontend

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingEngine is an HTTP server that counts the connections it
// accepted, so tests can tell reuse from a fresh dial.
type countingEngine struct {
	*httptest.Server
	conns atomic.Int64
}

func newCountingEngine(t *testing.T, h http.HandlerFunc) *countingEngine {
	t.Helper()
	e := &countingEngine{}
	e.Server = httptest.NewUnstartedServer(h)
	e.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.conns.Add(1)
		}
	}
	e.Start()
	t.Cleanup(e.Close)
	return e
}

func newTestEngineTransport(t *testing.T, cfg Config) *engineTransport {
	t.Helper()
	tr := newEngineTransport(cfg.withDefaults())
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// do posts body through tr and returns the status and the whole answer.
func do(t *testing.T, tr http.RoundTripper, ctx context.Context, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Test", "1")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}

func echoHandler(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	w.Header().Set("X-Seen", r.Header.Get("X-Test"))
	_, _ = w.Write(append([]byte(r.Method+" "+r.URL.Path+" "), data...))
}

func TestEngineTransportReusesConnections(t *testing.T) {
	e := newCountingEngine(t, echoHandler)
	tr := newTestEngineTransport(t, Config{})
	for i := range 5 {
		status, got := do(t, tr, context.Background(), e.URL+"/v1/completions", "hello")
		if status != 200 || got != "POST /v1/completions hello" {
			t.Fatalf("request %d: %d %q", i, status, got)
		}
	}
	if n := e.conns.Load(); n != 1 {
		t.Fatalf("%d connections for 5 sequential requests, want 1", n)
	}
}

func TestEngineTransportChunkedAnswer(t *testing.T) {
	e := newCountingEngine(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{"data: a\n\n", "data: b\n\n", "data: [DONE]\n\n"} {
			_, _ = io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	})
	tr := newTestEngineTransport(t, Config{})
	for range 2 {
		if _, got := do(t, tr, context.Background(), e.URL+"/s", ""); got != "data: a\n\ndata: b\n\ndata: [DONE]\n\n" {
			t.Fatalf("stream %q", got)
		}
	}
	if n := e.conns.Load(); n != 1 {
		t.Fatalf("%d connections, want 1: a chunked body read to its end frees its connection", n)
	}
}

func TestEngineTransportRetriesStaleIdleConnection(t *testing.T) {
	e := newCountingEngine(t, echoHandler)
	tr := newTestEngineTransport(t, Config{})
	do(t, tr, context.Background(), e.URL+"/a", "x")
	// The engine drops its idle connections (a restart, an idle timeout):
	// the pooled connection is dead and the next request must not fail.
	e.CloseClientConnections()
	body := "replayed"
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/b", strings.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("request on a stale connection was not retried: %v", err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(data) != "POST /b replayed" {
		t.Fatalf("got %q", data)
	}
	if n := e.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

func TestEngineTransportAbandonedBodyClosesConnection(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	e := newCountingEngine(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, big) })
	tr := newTestEngineTransport(t, Config{})
	req, _ := http.NewRequest(http.MethodGet, e.URL+"/big", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(buf); err == nil {
		t.Fatal("read after Close succeeded")
	}
	if _, got := do(t, tr, context.Background(), e.URL+"/big", ""); len(got) != len(big) {
		t.Fatalf("second answer %d bytes", len(got))
	}
	if n := e.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2: a half-read answer must not be reused", n)
	}
}

func TestEngineTransportCancelUnblocksRead(t *testing.T) {
	release := make(chan struct{})
	e := newCountingEngine(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	tr := newTestEngineTransport(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/s", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	if line, _ := rd.ReadString('\n'); line != "data: first\n" {
		t.Fatalf("first line %q", line)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(rd)
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("read of a cancelled exchange ended cleanly")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not unblock the body read")
	}
	resp.Body.Close()
	tr.mu.Lock()
	idle := len(tr.idle)
	tr.mu.Unlock()
	if idle != 0 {
		t.Fatal("a cancelled exchange's connection went back to the pool")
	}
}

func TestEngineTransportHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	e := newCountingEngine(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	defer close(release)
	tr := newTestEngineTransport(t, Config{UpstreamHeaderTimeout: 50 * time.Millisecond})
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/slow", strings.NewReader("x"))
	_, err := tr.RoundTrip(req)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err %v, want a timeout", err)
	}
}

func TestEngineTransportRefusesHeaderInjection(t *testing.T) {
	e := newCountingEngine(t, echoHandler)
	tr := newTestEngineTransport(t, Config{})
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/a", strings.NewReader("x"))
	req.Header["X-Bad"] = []string{"v\r\nX-Injected: 1"}
	if _, err := tr.RoundTrip(req); !errors.Is(err, errEngineHeader) {
		t.Fatalf("err %v, want errEngineHeader", err)
	}
}

func TestEngineTransportSendsPooledBody(t *testing.T) {
	e := newCountingEngine(t, echoHandler)
	tr := newTestEngineTransport(t, Config{})
	data := strings.Repeat("0123456789", 10_000)
	b := getBody(len(data))
	copy(b.data, data)
	defer b.release()
	rd, err := b.reader()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/p", rd)
	req.ContentLength = int64(len(data))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != "POST /p "+data {
		t.Fatalf("engine saw %d bytes, want %d", len(got)-len("POST /p "), len(data))
	}
}

func TestEngineTransportRetryDialsFresh(t *testing.T) {
	release := make(chan struct{})
	e := newCountingEngine(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
		echoHandler(w, r)
	})
	tr := newTestEngineTransport(t, Config{})
	// Two requests in flight at once leave two idle connections behind.
	errc := make(chan error, 2)
	for range 2 {
		go func() {
			req, _ := http.NewRequest(http.MethodPost, e.URL+"/hold", strings.NewReader("x"))
			resp, err := tr.RoundTrip(req)
			if err == nil {
				_, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			errc <- err
		}()
	}
	for e.conns.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	// The engine drops both (its keep-alive timeout): the retry after the
	// first stale connection must not take the second one.
	e.CloseClientConnections()
	body := "after idle"
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/b", strings.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("request after the engine dropped its idle connections: %v", err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(data) != "POST /b after idle" {
		t.Fatalf("got %q", data)
	}
}

func TestEngineTransportExpiresIdleConnections(t *testing.T) {
	e := newCountingEngine(t, echoHandler)
	now := time.Unix(1000, 0)
	tr := newTestEngineTransport(t, Config{Now: func() time.Time { return now }})
	do(t, tr, context.Background(), e.URL+"/a", "x")
	now = now.Add(engineIdleTimeout - time.Millisecond)
	do(t, tr, context.Background(), e.URL+"/a", "x")
	if n := e.conns.Load(); n != 1 {
		t.Fatalf("%d connections within the idle timeout, want 1", n)
	}
	now = now.Add(engineIdleTimeout + time.Millisecond)
	do(t, tr, context.Background(), e.URL+"/a", "x")
	if n := e.conns.Load(); n != 2 {
		t.Fatalf("%d connections after the idle timeout, want 2", n)
	}
}
