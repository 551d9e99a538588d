package oaiedge

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func TestKeys(t *testing.T) {
	k, err := NewKeys("key-one-0123456789", "key-two-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, cred string
		ok         bool
	}{
		{"first", "key-one-0123456789", true},
		{"second", "key-two-0123456789", true},
		{"prefix", "key-one-012345678", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if k.Match(tc.cred) != tc.ok {
				t.Fatalf("Match(%q) = %v", tc.cred, !tc.ok)
			}
		})
	}
	for _, bad := range []string{"short", "has a space 0123456789"} {
		if _, err := NewKeys(bad); !errors.Is(err, ErrKeys) {
			t.Fatalf("NewKeys accepted a bad key: %v", err)
		}
	}
}

func TestAccessConfigReadsKeyFiles(t *testing.T) {
	f := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(f, []byte("# clients\nfile-key-0123456789\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := AccessConfig{APIKeys: []string{"flag-key-0123456789"}, APIKeyFile: f}.Build()
	if err != nil || !a.Clients.Match("file-key-0123456789") || !a.Clients.Match("flag-key-0123456789") {
		t.Fatalf("keys from the flag and the file: %v", err)
	}
	if _, err := (AccessConfig{OperatorTokenFile: filepath.Join(t.TempDir(), "none")}).Build(); err == nil {
		t.Fatal("a missing token file was accepted")
	}
}

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct{ header, want string }{
		{"Bearer abc", "abc"}, {"bearer  abc ", "abc"}, {"Basic abc", ""}, {"", ""}, {"Bearer", ""},
	} {
		h := http.Header{}
		h.Set("Authorization", tc.header)
		if got := BearerToken(h); got != tc.want {
			t.Fatalf("%q: %q, want %q", tc.header, got, tc.want)
		}
	}
}

func TestUTF8IsRefusedInPrompts(t *testing.T) {
	bad := "\xff\xfe"
	tests := []struct {
		name  string
		ep    Endpoint
		body  string
		param string
	}{
		{"completion prompt", Completions, `{"model":"m","prompt":"a` + bad + `"}`, "prompt"},
		{"second prompt of a batch", Completions, `{"model":"m","prompt":["a","` + bad + `"]}`, "prompt"},
		{"chat content", Chat, `{"model":"m","messages":[{"role":"user","content":"` + bad + `"}]}`, "messages[0].content"},
		{"chat part", Chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"` + bad + `"}]}]}`, "messages[0].content"},
		{"embeddings input", Embeddings, `{"model":"m","input":"` + bad + `"}`, "input"},
		{"responses instructions", Responses, `{"model":"m","input":"x","instructions":"` + bad + `"}`, "instructions"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.body), tc.ep, Options{MaxPromptTokens: 100})
			if !errors.Is(err, ErrInvalid) || ParamOf(err) != tc.param {
				t.Fatalf("err %v (param %q), want invalid %s", err, ParamOf(err), tc.param)
			}
		})
	}
	if _, err := Parse([]byte(`{"model":"m","prompt":"caf\u00e9 \u00e9"}`), Completions, Options{MaxPromptTokens: 100}); err != nil {
		t.Fatalf("valid UTF-8 and escapes refused: %v", err)
	}
}

func TestSessionKeys(t *testing.T) {
	req := &Request{PromptCacheKey: "pck", User: "usr"}
	tests := []struct {
		name    string
		keys    SessionKeys
		headers map[string]string
		req     *Request
		want    string
	}{
		{"header first", SessionKeys{}, map[string]string{"X-Session-Id": "h"}, req, "h"},
		{"llm-d header", SessionKeys{}, map[string]string{"x-session-token": "llmd"}, req, "llmd"},
		{"sglang header", SessionKeys{}, map[string]string{"x-smg-routing-key": "smg"}, req, "smg"},
		{"prompt_cache_key", SessionKeys{}, nil, req, "pck"},
		{"user", SessionKeys{}, nil, &Request{User: "usr"}, "usr"},
		{"body fields off", SessionKeys{BodyFields: []string{}}, nil, req, ""},
		{"user before prompt_cache_key", SessionKeys{BodyFields: []string{"user", "prompt_cache_key"}}, nil, req, "usr"},
		{"custom header list", SessionKeys{Headers: []string{"x-my-session"}}, map[string]string{"X-Session-Id": "h", "X-My-Session": "mine"}, req, "mine"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := tc.keys.Validate()
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			s, err := keys.Read(h, tc.req)
			if err != nil || s.Key() != tc.want {
				t.Fatalf("key %q err %v, want %q", s.Key(), err, tc.want)
			}
		})
	}
	for _, bad := range []SessionKeys{{Headers: []string{"bad header"}}, {BodyFields: []string{"metadata"}}} {
		if _, err := bad.Validate(); !errors.Is(err, ErrSessionKeys) {
			t.Fatalf("Validate(%+v): %v", bad, err)
		}
	}
	long := &Request{PromptCacheKey: string(make([]byte, MaxSessionIDBytes+1))}
	if _, err := (SessionKeys{}).Read(http.Header{}, long); ParamOf(err) != "prompt_cache_key" {
		t.Fatalf("an over-long prompt_cache_key: %v", err)
	}
}

func TestClientMessage(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"dispatch: model not found: \"x\"", "model not found: \"x\""},
		{"gateway: no router node reachable: dial tcp 127.0.0.1:1: connect: connection refused", "no router node reachable: dial tcp 127.0.0.1:1: connection refused"},
		{"timeout", "timeout"},
	} {
		if got := ClientMessage(errors.New(tc.in)); got != tc.want {
			t.Fatalf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestGuardAnswersInTheOpenAIShape(t *testing.T) {
	ops, _ := NewKeys("operator-0123456789")
	var refused []string
	a := &Access{Operators: ops, Refused: func(s Scope, r string) { refused = append(refused, s.String()+"/"+r) }}
	h := a.Guard(NewTable(), ScopeAdmin, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	w := httptest.NewRecorder()
	h(w, httptest.NewRequest("DELETE", "/v1/sessions/x", nil))
	if w.Code != 401 || w.Header().Get("WWW-Authenticate") == "" || len(refused) != 1 || refused[0] != "admin/missing" {
		t.Fatalf("status %d, refusals %v, body %s", w.Code, refused, w.Body)
	}
}
