package frontend

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/internal/oaiedge/oaiedgetest"
)

func newClient(ts *testServer) *oaiedgetest.Client {
	return &oaiedgetest.Client{Base: ts.URL, HTTP: ts.client, Header: http.Header{"Authorization": {"Bearer x"}}}
}

func chatParams() map[string]any {
	return map[string]any{"model": "m", "messages": []map[string]any{
		{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}}}
}

func TestChatNonStreaming(t *testing.T) {
	ts, r, e := setup(t, Config{}, nil)
	resp, err := newClient(ts).Create(context.Background(), "/v1/chat/completions", chatParams())
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "Hello, world" {
		t.Fatalf("content %q", got)
	}
	if resp.Usage.CompletionTokens != 3 {
		t.Fatalf("usage %+v", resp.Usage)
	}
	req := r.lastRequest(t)
	if req.Text != "system\nbe brief\nuser\nhi\n" || req.Tokens != nil || req.Model != "m" {
		t.Fatalf("routed %+v", req)
	}
	id, errs := r.waitDone(t, ts)
	if len(errs) != 1 || errs[0] != nil || r.first[id] != 1 || r.output[id] != 3 {
		t.Fatalf("done %v first %d output tokens %d (want usage's 3)", errs, r.first[id], r.output[id])
	}
	body, upID := e.lastBody(t)
	if upID != id {
		t.Fatalf("engine saw request id %q, router %q", upID, id)
	}
	var sent map[string]any
	if err := json.Unmarshal(body, &sent); err != nil || sent["model"] != "m" {
		t.Fatalf("engine body %s", body)
	}
	if n := testutil.ToFloat64(ts.metrics.Requests.WithLabelValues("m", "/v1/chat/completions", "ok")); n != 1 {
		t.Fatalf("requests metric %v", n)
	}
}

func TestChatStreamingWithUsage(t *testing.T) {
	ts, r, _ := setup(t, Config{}, nil)
	p := chatParams()
	p["stream"] = true
	p["stream_options"] = map[string]any{"include_usage": true}
	stream := newClient(ts).Stream(context.Background(), "/v1/chat/completions", p)
	var text strings.Builder
	var usage int64
	for stream.Next() {
		c := stream.Current()
		if len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
		if c.Usage.CompletionTokens > 0 {
			usage = c.Usage.CompletionTokens
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	if text.String() != "Hello, world" || usage != 3 {
		t.Fatalf("text %q usage %d", text.String(), usage)
	}
	id, errs := r.waitDone(t, ts)
	if len(errs) != 1 || errs[0] != nil || r.first[id] != 1 || r.output[id] != 3 {
		t.Fatalf("done %v first %d output tokens %d (want one per content chunk, 3)", errs, r.first[id], r.output[id])
	}
	if r.lastRequest(t).Arrival.IsZero() {
		t.Fatal("arrival not set")
	}
	if n := testutil.CollectAndCount(ts.metrics.TTFT); n != 1 {
		t.Fatalf("TTFT series %d", n)
	}
}

func TestCompletions(t *testing.T) {
	tests := []struct {
		name   string
		prompt any
		tokens []uint32
		text   string
	}{
		{name: "string", prompt: "abc", text: "abc"},
		{name: "token ids", prompt: []int64{1, 2, 3}, tokens: []uint32{1, 2, 3}},
		{name: "token id arrays", prompt: [][]int64{{4, 5}, {6}}, tokens: []uint32{4, 5}},
		{name: "strings", prompt: []string{"x", "y"}, text: "x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, r, _ := setup(t, Config{}, nil)
			p := map[string]any{"model": "m", "prompt": tc.prompt, "max_tokens": 9}
			resp, err := newClient(ts).Create(context.Background(), "/v1/completions", p)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Choices[0].Text != "Hello, world" {
				t.Fatalf("text %q", resp.Choices[0].Text)
			}
			req := r.lastRequest(t)
			if req.Text != tc.text || !equalTokens(req.Tokens, tc.tokens) || req.MaxTokens != 9 {
				t.Fatalf("routed %+v", req)
			}
			p["stream"] = true
			stream := newClient(ts).Stream(context.Background(), "/v1/completions", p)
			var text strings.Builder
			for stream.Next() {
				if c := stream.Current(); len(c.Choices) > 0 {
					text.WriteString(c.Choices[0].Text)
				}
			}
			if err := stream.Err(); err != nil || text.String() != "Hello, world" {
				t.Fatalf("stream %q %v", text.String(), err)
			}
			stream.Close()
		})
	}
}

func TestModelsHealthReadyUnbind(t *testing.T) {
	e := newFakeEngine(t, nil)
	r := newFakeRouter(e.URL, "b", "a")
	ts := startFrontend(t, Config{}, r)
	ids, err := newClient(ts).Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[0] != "a" || ids[1] != "b" {
		t.Fatalf("models %v", ids)
	}
	page, err := ts.client.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if !strings.Contains(string(body), `"created":1700000000`) {
		t.Fatalf("models page %s", body)
	}
	for _, path := range []string{"/health", "/ready", "/metrics"} {
		if code := get(t, ts, path); code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, ts.URL+"/v1/sessions/s-1", nil)
	resp, err := ts.client.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("unbind %v %v", resp, err)
	}
	resp.Body.Close()
	if len(r.unbound) != 1 || r.unbound[0] != "s-1" {
		t.Fatalf("unbound %v", r.unbound)
	}
	r.mu.Lock()
	r.models = map[string]bool{}
	r.mu.Unlock()
	if code := get(t, ts, "/ready"); code != http.StatusServiceUnavailable {
		t.Fatalf("ready without models: %d", code)
	}
}
