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
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// decodeError checks an OpenAI error body and returns its param and code.
func decodeError(t *testing.T, resp *http.Response) (param, code string) {
	t.Helper()
	var env struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &env); err != nil || env.Error.Message == "" || env.Error.Type == "" {
		t.Fatalf("not an OpenAI error body: %s", data)
	}
	if env.Error.Param != nil {
		param = *env.Error.Param
	}
	if env.Error.Code != nil {
		code = *env.Error.Code
	}
	return param, code
}

func TestClientErrors(t *testing.T) {
	const chat, compl = "/v1/chat/completions", "/v1/completions"
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name    string
		path    string
		body    string
		headers map[string]string
		status  int
		param   string
		code    string
	}{
		{name: "malformed JSON", path: chat, body: `{"model":"m",`, status: 400, code: "invalid_request"},
		{name: "trailing garbage", path: chat, body: `{"model":"m",` + msgs + `} x`, status: 400, code: "invalid_request"},
		{name: "not an object", path: chat, body: `[1]`, status: 400, code: "invalid_request"},
		{name: "model wrong type", path: chat, body: `{"model":1,` + msgs + `}`, status: 400, param: "model", code: "invalid_request"},
		{name: "model missing", path: chat, body: `{` + msgs + `}`, status: 400, param: "model", code: "invalid_request"},
		{name: "stream wrong type", path: chat, body: `{"model":"m","stream":"yes",` + msgs + `}`, status: 400, param: "stream", code: "invalid_request"},
		{name: "include_usage wrong type", path: chat, body: `{"model":"m","stream_options":{"include_usage":1},` + msgs + `}`, status: 400, param: "stream_options.include_usage", code: "invalid_request"},
		{name: "max_tokens negative", path: chat, body: `{"model":"m","max_tokens":-1,` + msgs + `}`, status: 400, param: "max_tokens", code: "invalid_request"},
		{name: "messages empty", path: chat, body: `{"model":"m","messages":[]}`, status: 400, param: "messages", code: "invalid_request"},
		{name: "messages missing", path: chat, body: `{"model":"m"}`, status: 400, param: "messages", code: "invalid_request"},
		{name: "content wrong type", path: chat, body: `{"model":"m","messages":[{"role":"user","content":5}]}`, status: 400, param: "messages[0].content", code: "invalid_request"},
		{name: "message not object", path: chat, body: `{"model":"m","messages":["hi"]}`, status: 400, param: "messages[0]", code: "invalid_request"},
		{name: "token_ids wrong type", path: chat, body: `{"model":"m",` + msgs + `,"kvrouter":{"token_ids":["a"]}}`, status: 400, param: "kvrouter.token_ids", code: "invalid_request"},
		{name: "prompt empty", path: compl, body: `{"model":"m","prompt":""}`, status: 400, param: "prompt", code: "invalid_request"},
		{name: "prompt empty array", path: compl, body: `{"model":"m","prompt":[]}`, status: 400, param: "prompt", code: "invalid_request"},
		{name: "prompt float tokens", path: compl, body: `{"model":"m","prompt":[1.5]}`, status: 400, param: "prompt", code: "invalid_request"},
		{name: "prompt negative token", path: compl, body: `{"model":"m","prompt":[1,-2]}`, status: 400, param: "prompt", code: "invalid_request"},
		{name: "prompt mixed", path: compl, body: `{"model":"m","prompt":[1,"a"]}`, status: 400, param: "prompt", code: "invalid_request"},
		{name: "prompt too long", path: compl, body: `{"model":"m","prompt":[1,2,3,4,5,6,7,8,9]}`, status: 400, param: "prompt", code: "context_length_exceeded"},
		{name: "text prompt too long", path: compl, body: `{"model":"m","prompt":"` + strings.Repeat("a", 40) + `"}`, status: 400, param: "prompt", code: "context_length_exceeded"},
		{name: "oversized body", path: compl, body: `{"model":"m","prompt":"` + strings.Repeat("a", 2000) + `"}`, status: 413, code: "request_too_large"},
		{name: "unknown model", path: compl, body: `{"model":"nope","prompt":"x"}`, status: 404, code: "model_not_found"},
		{name: "session id too long", path: compl, body: `{"model":"m","prompt":"x"}`, headers: map[string]string{"X-Session-ID": strings.Repeat("s", 257)}, status: 400, param: "X-Session-Id", code: "invalid_request"},
		{name: "bad pin", path: compl, body: `{"model":"m","prompt":"x"}`, headers: map[string]string{"X-Worker-Instance-Id": "abc"}, status: 400, param: "X-Worker-Instance-Id", code: "invalid_request"},
		{name: "unknown route", path: "/v1/nothing", body: `{}`, status: 404, code: "not_found"},
	}
	ts, _, _ := setup(t, Config{MaxPromptTokens: 8, MaxBodyBytes: 1024}, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, ts, tc.path, tc.body, tc.headers)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			param, code := decodeError(t, resp)
			if param != tc.param || code != tc.code {
				t.Fatalf("param %q code %q, want %q %q", param, code, tc.param, tc.code)
			}
		})
	}
	if resp := post(t, ts, compl, `{"model":"m","prompt":[1,2]}`, nil); resp.StatusCode != 200 {
		t.Fatalf("server unhealthy after bad requests: %d", resp.StatusCode)
	}
	if code := get(t, ts, "/v1/chat/completions"); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET on a POST route: %d", code)
	}
}

func TestDispatchErrorStatus(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		cfg    Config
		status int
	}{
		{name: "overloaded default", err: dispatch.ErrOverloaded, status: 529},
		{name: "overloaded configured", err: dispatch.ErrOverloaded, cfg: Config{OverloadStatus: 503}, status: 503},
		{name: "no engine", err: dispatch.ErrNoEngine, status: 503},
		{name: "session limit", err: dispatch.ErrSessionLimit, status: 429},
		{name: "bad request", err: dispatch.ErrBadRequest, status: 400},
		{name: "prompt too long", err: dispatch.ErrPromptTooLong, status: 400},
		{name: "unclassified", err: errors.New("boom"), status: 500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, r, _ := setup(t, tc.cfg, nil)
			r.err = fmt.Errorf("routing: %w", tc.err)
			resp := post(t, ts, "/v1/completions", `{"model":"m","prompt":"x"}`, nil)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			decodeError(t, resp)
		})
	}
}

func TestErrorTable(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{name: "invalid", err: oaiedge.Invalid("x", "bad"), status: 400, code: "invalid_request"},
		{name: "too long", err: fmt.Errorf("w: %w", dispatch.ErrPromptTooLong), status: 400, code: "context_length_exceeded"},
		{name: "too large", err: oaiedge.ErrBodyTooLarge, status: 413, code: "request_too_large"},
		{name: "body timeout", err: oaiedge.ErrBodyTimeout, status: 408, code: "request_timeout"},
		{name: "model", err: dispatch.ErrModelNotFound, status: 404, code: "model_not_found"},
		{name: "overloaded", err: dispatch.ErrOverloaded, status: 529, code: "overloaded"},
		{name: "no engine", err: dispatch.ErrNoEngine, status: 503, code: "no_engine"},
		{name: "upstream", err: fmt.Errorf("%w: x", ErrUpstream), status: 502, code: "upstream_error"},
		{name: "canceled", err: context.Canceled, status: StatusClientClosed, code: "client_closed"},
		{name: "other", err: io.ErrUnexpectedEOF, status: 500, code: "internal_error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := errorTable(529).Classify(tc.err)
			if c.Status != tc.status || c.Code != tc.code {
				t.Fatalf("got %d %q, want %d %q", c.Status, c.Code, tc.status, tc.code)
			}
		})
	}
}

// streamRequest opens a raw streaming request and returns the response.
func streamRequest(t *testing.T, ctx context.Context, ts *testServer, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(body))
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

const streamBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`

// readUntil reads rd line by line up to the first line holding s.
func readUntil(t *testing.T, rd *bufio.Reader, s string) {
	t.Helper()
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, s) {
			return
		}
	}
}

func TestClientDisconnectMidStream(t *testing.T) {
	ts, r, e := setup(t, Config{}, func(e *fakeEngine) { e.hang = true })
	ctx, cancel := context.WithCancel(context.Background())
	resp := streamRequest(t, ctx, ts, streamBody)
	rd := bufio.NewReader(resp.Body)
	readUntil(t, rd, "Hello")
	cancel()
	resp.Body.Close()
	select {
	case <-e.canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the engine request was not canceled")
	}
	_, errs := r.waitDone(t, ts)
	if len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
		t.Fatalf("Done errors %v, want one context.Canceled", errs)
	}
}

// A decision whose engine is lost (dropped for silence) ends its request:
// a stream hanging after its first token ends with an error event, and a
// request still waiting for the engine's answer gets 502, both when the
// Lost context ends rather than when the client gives up.
func TestLostEngineEndsItsRequests(t *testing.T) {
	ts, r, e := setup(t, Config{}, func(e *fakeEngine) { e.hang = true })
	lost, drop := context.WithCancelCause(context.Background())
	r.lost = lost
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp := streamRequest(t, ctx, ts, streamBody)
	rd := bufio.NewReader(resp.Body)
	readUntil(t, rd, "Hello")
	drop(fmt.Errorf("%w: engine 7", dispatch.ErrEngineSilent))
	rest, err := io.ReadAll(rd)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(rest), `"code":"upstream_error"`) {
		t.Fatalf("stream after the engine was lost: %v %q, want an upstream_error event", err, rest)
	}
	select {
	case <-e.canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the engine request was not canceled")
	}
	if _, errs := r.waitDone(t, ts); len(errs) != 1 || !errors.Is(errs[0], dispatch.ErrEngineSilent) {
		t.Fatalf("Done errors %v, want one ErrEngineSilent", errs)
	}

	// An engine that reads the request and never answers; it notices the
	// router's cancellation once the body is read.
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(silent.Close)
	r2 := newFakeRouter(silent.URL, "m")
	lost2, drop2 := context.WithCancelCause(context.Background())
	r2.lost = lost2
	ts2 := startFrontend(t, Config{}, r2)
	time.AfterFunc(100*time.Millisecond, func() { drop2(fmt.Errorf("%w: engine 7", dispatch.ErrEngineSilent)) })
	resp = post(t, ts2, "/v1/completions", `{"model":"m","prompt":"x"}`, nil)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("waiting request after the engine was lost: status %d, want 502", resp.StatusCode)
	}
	if _, code := decodeError(t, resp); code != "upstream_error" {
		t.Fatalf("code %q", code)
	}
	if _, errs := r2.waitDone(t, ts2); len(errs) != 1 || !errors.Is(errs[0], dispatch.ErrEngineSilent) {
		t.Fatalf("Done errors %v, want one ErrEngineSilent", errs)
	}
}

func TestStalledClientIsCut(t *testing.T) {
	ts, r, e := setup(t, Config{StreamWriteTimeout: 200 * time.Millisecond}, func(e *fakeEngine) { e.flood = true })
	conn := rawRequest(t, ts, "/v1/chat/completions", streamBody)
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	buf := make([]byte, 512)
	if _, err := conn.Read(buf); err != nil { // headers arrive, then the client stops reading
		t.Fatal(err)
	}
	_, errs := r.waitDone(t, ts)
	if len(errs) != 1 || errs[0] == nil {
		t.Fatalf("Done errors %v, want one write error", errs)
	}
	select {
	case <-e.canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the engine request was not canceled")
	}
}

func TestSlowProgressingStreamSurvives(t *testing.T) {
	tokens := strings.Split("a b c d e f g h i j", " ")
	ts, r, _ := setup(t, Config{StreamWriteTimeout: 100 * time.Millisecond}, func(e *fakeEngine) {
		e.tokens, e.delay = tokens, 40*time.Millisecond
	})
	resp := streamRequest(t, context.Background(), ts, streamBody)
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("headers %v", resp.Header)
	}
	data, err := io.ReadAll(slowReader{resp.Body})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), `"content":"`); n != len(tokens)+1 || !strings.HasSuffix(string(data), "data: [DONE]\n\n") {
		t.Fatalf("stream cut short: %s", data)
	}
	if _, errs := r.waitDone(t, ts); len(errs) != 1 || errs[0] != nil {
		t.Fatalf("Done errors %v", errs)
	}
}

// slowReader reads in small pieces with pauses: a slow but live client.
type slowReader struct{ r io.Reader }

func (s slowReader) Read(p []byte) (int, error) {
	time.Sleep(15 * time.Millisecond)
	return s.r.Read(p[:min(len(p), 64)])
}

// rawRequest sends a whole HTTP/1.1 request on a fresh connection.
func rawRequest(t *testing.T, ts *testServer, path, body string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	return conn
}

func TestSlowlorisHeadersCut(t *testing.T) {
	ts, _, _ := setup(t, Config{ReadHeaderTimeout: 200 * time.Millisecond}, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, conn) // returns when the server closes
		close(closed)
	}()
	header := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 200)
	for i := 0; i < len(header); i++ {
		select {
		case <-closed:
			if d := time.Since(start); d < 150*time.Millisecond || d > 2*time.Second {
				t.Fatalf("cut after %v", d)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
		_, _ = conn.Write([]byte{header[i]})
	}
	t.Fatal("a client trickling headers was not cut")
}

func TestSlowBodyCut(t *testing.T) {
	ts, _, _ := setup(t, Config{BodyReadTimeout: 200 * time.Millisecond}, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
	go func() {
		for i := 0; i < 100; i++ {
			time.Sleep(20 * time.Millisecond)
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", resp.StatusCode)
	}
	decodeError(t, resp)
}
