package frontend

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

func equalTokens(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBodyForwardedUnchanged(t *testing.T) {
	ts, r, e := setup(t, Config{}, nil)
	body := `{"model":"m", "messages":[{"role":"user","content":[{"type":"text","text":"a\u00e9"}]}],` +
		`"kvrouter":{"token_ids":[5,6,7],"lora":"ad"},"cache_salt":"s","extra":{"x":[1,2]}}`
	resp := post(t, ts, "/v1/chat/completions", body, map[string]string{"X-Request-Id": "rid-1"})
	if resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") != "rid-1" {
		t.Fatalf("status %d id %q", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	got, id := e.lastBody(t)
	if string(got) != body || id != "rid-1" {
		t.Fatalf("engine got %s (id %s)", got, id)
	}
	req := r.lastRequest(t)
	if !equalTokens(req.Tokens, []uint32{5, 6, 7}) || req.Text != "" || req.LoRA != "ad" || req.CacheSalt != "s" {
		t.Fatalf("routed %+v", req)
	}
}

// post sends a raw JSON body and returns the response with its body read
// into a buffer.
func post(t *testing.T, ts *testServer, path, body string, headers map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.URL+path, strings.NewReader(body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp
}

func get(t *testing.T, ts *testServer, path string) int {
	t.Helper()
	resp, err := ts.client.Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
