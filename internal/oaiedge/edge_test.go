package oaiedge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

var errEdgeOwn = errors.New("edge's own")

func TestTableClassify(t *testing.T) {
	tab := NewTable(Entry(errEdgeOwn, http.StatusBadGateway, "server_error", "own"))
	tests := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{name: "own row", err: fmt.Errorf("x: %w", errEdgeOwn), status: 502, code: "own"},
		{name: "invalid", err: Invalid("p", "bad"), status: 400, code: "invalid_request"},
		{name: "malformed", err: malformed(), status: 400, code: "invalid_request"},
		{name: "too long", err: tooLong("prompt", 1), status: 400, code: "context_length_exceeded"},
		{name: "too large", err: ErrBodyTooLarge, status: 413, code: "request_too_large"},
		{name: "not ready", err: ErrNotReady, status: 503, code: "not_ready"},
		{name: "other", err: io.ErrUnexpectedEOF, status: 500, code: "internal_error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if c := tab.Classify(tc.err); c.Status != tc.status || c.Code != tc.code {
				t.Fatalf("class %+v, want %d %q", c, tc.status, tc.code)
			}
		})
	}
}

func TestTableWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	if st := NewTable().Write(rec, Invalid("X-Session-Id", "too long")); st != 400 || rec.Code != 400 {
		t.Fatalf("status %d, recorded %d", st, rec.Code)
	}
	var b ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		t.Fatal(err)
	}
	if b.Error.Message != "too long" || b.Error.Type != "invalid_request_error" || b.Error.Param == nil ||
		*b.Error.Param != "X-Session-Id" || b.Error.Code == nil || *b.Error.Code != "invalid_request" {
		t.Fatalf("body %s", rec.Body)
	}
	if !strings.Contains(string(ErrorJSON(ErrNotFound, NewTable().Classify(ErrNotFound))), `"param":null`) {
		t.Fatal("an error naming no parameter must encode param as null")
	}
}

func TestMux(t *testing.T) {
	ready := false
	ok := func(Endpoint) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(299) }
	}
	mux := NewMux(NewTable(), nil, ok, func() bool { return ready },
		Route{Pattern: "GET /v1/sessions/{id}/home", Handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(298) }},
		Route{Pattern: "DELETE /v1/sessions/{id}/home", Handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(297) }})
	tests := []struct {
		method, path string
		ready        bool
		status       int
	}{
		{"POST", "/v1/completions", false, 299},
		{"POST", "/v1/chat/completions", false, 299},
		{"GET", "/v1/completions", false, 405},
		{"GET", "/health", false, 200},
		{"GET", "/ready", false, 503},
		{"GET", "/ready", true, 200},
		{"POST", "/ready", true, 405},
		{"GET", "/v1/sessions/a/home", false, 298},
		{"DELETE", "/v1/sessions/a/home", false, 297},
		{"PUT", "/v1/sessions/a/home", false, 405},
		{"GET", "/v1/sessions/a", false, 404},
		{"GET", "/nowhere", false, 404},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			ready = tc.ready
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d", rec.Code, tc.status)
			}
		})
	}
}

func TestReadSession(t *testing.T) {
	long := strings.Repeat("x", MaxSessionIDBytes+1)
	tests := []struct {
		name       string
		headers    map[string]string
		id, parent string
		key        string
		final      bool
		errParam   string
	}{
		{name: "none"},
		{name: "canonical wins", headers: map[string]string{"X-Session-ID": "a", "X-Dynamo-Session-ID": "b", "thread-id": "c"}, id: "a", key: "a"},
		{name: "dynamo over agents", headers: map[string]string{"X-Dynamo-Session-ID": "b", "x-claude-code-session-id": "c", "X-Dynamo-Parent-Session-ID": "p"}, id: "b", parent: "p", key: "p"},
		{name: "claude agent under session", headers: map[string]string{"x-claude-code-session-id": "s", "x-claude-code-agent-id": "ag"}, id: "ag", parent: "s", key: "s"},
		{name: "claude parent agent", headers: map[string]string{"x-claude-code-session-id": "s", "x-claude-code-agent-id": "ag", "x-claude-code-parent-agent-id": "pa"}, id: "ag", parent: "pa", key: "pa"},
		{name: "codex", headers: map[string]string{"thread-id": "t", "x-codex-parent-thread-id": "pt"}, id: "t", parent: "pt", key: "pt"},
		{name: "final", headers: map[string]string{"X-Session-ID": "a", "X-Dynamo-Session-Final": "true"}, id: "a", key: "a", final: true},
		{name: "bad final", headers: map[string]string{"X-Dynamo-Session-Final": "maybe"}, errParam: "X-Dynamo-Session-Final"},
		{name: "id too long", headers: map[string]string{"X-Session-ID": long}, errParam: "X-Session-Id"},
		{name: "implied parent too long", headers: map[string]string{"x-claude-code-agent-id": "ag", "x-claude-code-session-id": long}, errParam: "X-Claude-Code-Session-Id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			s, err := SessionKeys{}.Read(h, nil)
			if tc.errParam != "" {
				if !errors.Is(err, ErrInvalid) || ParamOf(err) != tc.errParam {
					t.Fatalf("err %v (param %q), want param %q", err, ParamOf(err), tc.errParam)
				}
				return
			}
			if err != nil || s.ID != tc.id || s.Parent != tc.parent || s.Key() != tc.key || s.Final != tc.final {
				t.Fatalf("got %+v (key %q), %v", s, s.Key(), err)
			}
		})
	}
}

func TestBodyReader(t *testing.T) {
	br := BodyReader{MaxBytes: 8, Timeout: time.Second}
	tests := []struct {
		name    string
		body    string
		chunked bool
		want    error
	}{
		{name: "declared", body: "12345678"},
		{name: "chunked", body: "1234", chunked: true},
		{name: "declared too large", body: "123456789", want: ErrBodyTooLarge},
		{name: "chunked too large", body: "123456789", chunked: true, want: ErrBodyTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.body))
			if tc.chunked {
				req.ContentLength = -1
			}
			rec := httptest.NewRecorder()
			var allocated int
			got, hold, err := br.ReadHeld(rec, req, func(n int) []byte { allocated = n; return make([]byte, n) })
			hold.Release()
			if !errors.Is(err, tc.want) || tc.want == nil && string(got) != tc.body {
				t.Fatalf("read %q, %v; want %v", got, err, tc.want)
			}
			if tc.want == nil && !tc.chunked && allocated != len(tc.body) {
				t.Fatalf("allocated %d for a declared %d", allocated, len(tc.body))
			}
			if tc.want != nil && rec.Header().Get("Connection") != "close" {
				t.Fatal("a refused body must close the connection")
			}
		})
	}
}
