package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/oaiedge/oaiedgetest"
	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/mocker"
)

func TestChatStreaming(t *testing.T) {
	h := startHarness(t, func(c *Config) { c.Engine.SpeedUp = 2 }, nil)
	client := h.client()
	const n = 12
	start := time.Now()
	body := chat("hello there, simulated engine", n, true)
	body["stream_options"] = map[string]any{"include_usage": true}
	stream := client.Stream(context.Background(), "/v1/chat/completions", body)
	var (
		content  strings.Builder
		chunks   int
		role     string
		finish   string
		usage    oaiedgetest.Usage
		arrivals []time.Time
	)
	for stream.Next() {
		c := stream.Current()
		if c.Usage.TotalTokens > 0 {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			if chunks == 0 {
				role = ch.Delta.Role
			}
			chunks++
			if ch.Delta.Content != "" {
				content.WriteString(ch.Delta.Content)
				arrivals = append(arrivals, time.Now())
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if role != "assistant" || finish != "length" || content.String() != expectedText(n) {
		t.Fatalf("role %q finish %q content %q", role, finish, content.String())
	}
	if len(arrivals) != n || chunks != n+2 {
		t.Fatalf("%d content chunks of %d chunks, want %d of %d", len(arrivals), chunks, n, n+2)
	}
	prompt := int64(len(TextTokens("<|user|>\nhello there, simulated engine\n")))
	if usage.PromptTokens != prompt || usage.CompletionTokens != n || usage.TotalTokens != prompt+n {
		t.Fatalf("usage %+v, want prompt %d", usage, prompt)
	}
	// Tokens cannot arrive before the engine makes them: the prefill and
	// n-1 decode iterations take at least 7.5 ms / SpeedUp each. The
	// first arrival may be late on a loaded machine, so the spread of the
	// stream is checked against half of its modelled length only.
	iter := 3750 * time.Microsecond
	if total := arrivals[n-1].Sub(start); total < n*iter {
		t.Fatalf("last token after %v, want at least %v", total, n*iter)
	}
	if span := arrivals[n-1].Sub(arrivals[0]); span < (n-1)*iter/2 {
		t.Fatalf("tokens span %v, want at least %v (paced, not one burst)", span, (n-1)*iter/2)
	}
}

func TestChatNonStreamingWithTokenIDs(t *testing.T) {
	h := startHarness(t, nil, nil)
	client := h.client()
	ids := tokenRange(1000, 3*testBlock+5)
	params := map[string]any{"model": testModel, "max_completion_tokens": 5,
		"messages": []map[string]any{{"role": "user", "content": "ignored for hashing"}},
		"kvrouter": map[string]any{"token_ids": ids}}
	var cached []int64
	for range 2 {
		resp, err := client.Create(context.Background(), "/v1/chat/completions", params)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != expectedText(5) || resp.Choices[0].FinishReason != "length" {
			t.Fatalf("response %+v", resp.Choices)
		}
		if resp.Usage.PromptTokens != int64(len(ids)) || resp.Usage.CompletionTokens != 5 || resp.Object != "chat.completion" {
			t.Fatalf("usage %+v object %q", resp.Usage, resp.Object)
		}
		cached = append(cached, resp.Usage.PromptTokensDetails.CachedTokens)
	}
	// The second request finds the three complete prompt blocks cached.
	if cached[0] != 0 || cached[1] != 3*testBlock {
		t.Fatalf("cached tokens %v, want [0 %d]", cached, 3*testBlock)
	}
}

func TestCompletions(t *testing.T) {
	h := startHarness(t, nil, nil)
	client := h.client()
	tests := []struct {
		name   string
		prompt any
		tokens int64
	}{
		{"token ids", tokenRange(1, 40), 40},
		{"one token array", [][]int64{tokenRange(7, 33)}, 33},
		{"text", "abcdefgh", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			params := map[string]any{"model": testModel, "prompt": tc.prompt, "max_tokens": 4}
			resp, err := client.Create(context.Background(), "/v1/completions", params)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Choices[0].Text != expectedText(4) || resp.Usage.PromptTokens != tc.tokens || resp.Object != "text_completion" {
				t.Fatalf("response %+v usage %+v", resp.Choices, resp.Usage)
			}
			params["stream"] = true
			stream := client.Stream(context.Background(), "/v1/completions", params)
			var text strings.Builder
			var finish string
			for stream.Next() {
				for _, ch := range stream.Current().Choices {
					text.WriteString(ch.Text)
					if ch.FinishReason != "" {
						finish = string(ch.FinishReason)
					}
				}
			}
			if err := stream.Err(); err != nil || text.String() != expectedText(4) || finish != "length" {
				t.Fatalf("stream %q finish %q err %v", text.String(), finish, err)
			}
		})
	}
}

func TestDefaultOutputLength(t *testing.T) {
	h := startHarness(t, func(c *Config) { c.DefaultMaxTokens = 3 }, nil)
	status, body := h.post("/v1/chat/completions", `{"model":"test-model","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, nil)
	var resp struct {
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || status != 200 {
		t.Fatalf("status %d body %s err %v", status, body, err)
	}
	if resp.Choices[0].Message.Content != expectedText(3) || resp.Choices[0].FinishReason != "stop" {
		t.Fatalf("body %s", body)
	}
}

func TestHTTPErrors(t *testing.T) {
	h := startHarness(t, nil, nil)
	chat := "/v1/chat/completions"
	tests := []struct {
		name   string
		path   string
		body   string
		header map[string]string
		status int
		code   string
	}{
		{"bad json", chat, `{"messages":`, nil, 400, "invalid_request"},
		{"no messages", chat, `{"model":"test-model","messages":[]}`, nil, 400, "invalid_request"},
		{"wrong model", chat, `{"model":"other","messages":[{"role":"user","content":"x"}]}`, nil, 404, "model_not_found"},
		{"bad rank", chat, `{"messages":[{"role":"user","content":"x"}]}`, map[string]string{"X-Dp-Rank": "3"}, 400, "invalid_dp_rank"},
		{"n=2", chat, `{"n":2,"messages":[{"role":"user","content":"x"}]}`, nil, 400, "invalid_request"},
		{"max_tokens 0", chat, `{"max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, nil, 400, "invalid_request"},
		{"token out of range", "/v1/completions", `{"prompt":[1,-2]}`, nil, 400, "invalid_request"},
		{"batched prompts", "/v1/completions", `{"prompt":["a","b"]}`, nil, 400, "invalid_request"},
		{"empty prompt", "/v1/completions", `{"prompt":""}`, nil, 400, "invalid_request"},
		{"too long", "/v1/completions", `{"prompt":"x","max_tokens":4096}`, nil, 400, "context_length_exceeded"},
		{"unknown path", "/v1/audio/speech", `{}`, nil, 404, "not_found"},
		{"embeddings without input", "/v1/embeddings", `{}`, nil, 400, "invalid_request"},
		{"detokenize without tokens", "/detokenize", `{}`, nil, 400, "invalid_request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := h.post(tc.path, tc.body, tc.header)
			var e apiError
			if err := json.Unmarshal([]byte(body), &e); err != nil || status != tc.status || e.Error.Code != tc.code || e.Error.Message == "" {
				t.Fatalf("status %d body %s, want %d %s", status, body, tc.status, tc.code)
			}
		})
	}
}

// TestAPIKey checks that an engine started with an API key refuses /v1
// requests without its bearer token (401, OpenAI error body) and serves
// them with it, while /health stays open.
func TestAPIKey(t *testing.T) {
	h := startHarness(t, func(c *Config) { c.APIKey = "s3cret" }, nil)
	body := `{"prompt":"hello","max_tokens":1}`
	for _, tc := range []struct {
		name   string
		header map[string]string
		status int
	}{
		{"no key", nil, 401},
		{"wrong key", map[string]string{"Authorization": "Bearer other"}, 401},
		{"not bearer", map[string]string{"Authorization": "s3cret"}, 401},
		{"right key", map[string]string{"Authorization": "Bearer s3cret"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := h.post("/v1/completions", body, tc.header)
			if status != tc.status {
				t.Fatalf("status %d (%s), want %d", status, out, tc.status)
			}
			if status == 401 {
				var e apiError
				if err := json.Unmarshal([]byte(out), &e); err != nil || e.Error.Code != "invalid_api_key" {
					t.Fatalf("401 body %s", out)
				}
			}
		})
	}
	if status, _ := h.get("/health"); status != 200 {
		t.Fatalf("/health behind the key: status %d", status)
	}
	bad := &Config{APIKey: "two words"}
	if err := bad.EnsureDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "api_key") {
		t.Fatalf("key with a space: %v", err)
	}
}

func TestModelsAndHealth(t *testing.T) {
	h := startHarness(t, nil, nil)
	client := h.client()
	models, err := client.Models(context.Background())
	if err != nil || len(models) != 1 || models[0] != testModel {
		t.Fatalf("models %+v err %v", models, err)
	}
	status, body := h.get("/health")
	if status != 200 || !strings.Contains(body, `"status":"ok"`) || !strings.Contains(body, `"engine_id":"42"`) {
		t.Fatalf("health %d %s", status, body)
	}
}

// A request whose client goes away is cancelled in the engine, streaming
// or not: the rank stops generating for it (it leaves the running set
// long before its 800 tokens, several seconds of decoding) and a new request is served normally.
func TestClientDisconnectCancelsTheRequest(t *testing.T) {
	tests := []struct {
		name   string
		stream bool
	}{{"streaming", true}, {"non-streaming", false}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := startHarness(t, func(c *Config) { c.Engine.SpeedUp = 1 }, nil)
			rk := h.srv.ranks[0]
			ctx, cancel := context.WithCancel(context.Background())
			params := chat("bye", 800, tc.stream)
			done := make(chan struct{})
			if tc.stream {
				stream := h.client().Stream(ctx, "/v1/chat/completions", params)
				if !stream.Next() {
					t.Fatalf("no first chunk: %v", stream.Err())
				}
				close(done)
				cancel()
				for stream.Next() {
				}
			} else {
				go func() { defer close(done); _, _ = h.client().Create(ctx, "/v1/chat/completions", params) }()
				waitUntil(t, "the request runs", func() bool { return rk.load0().Running == 1 })
				cancel()
			}
			<-done
			waitUntil(t, "the engine drops the request", func() bool {
				l := rk.load0()
				return l.Running == 0 && l.Waiting == 0 && rk.inflight.Load() == 0
			})
			if n := rk.canceled.Load(); n != 1 {
				t.Fatalf("canceled %d requests, want 1", n)
			}
			resp, err := h.client().Create(context.Background(), "/v1/chat/completions", chat("again", 2, false))
			if err != nil || resp.Content() != expectedText(2) {
				t.Fatalf("after disconnect: %v %+v", err, resp)
			}
			if n := rk.canceled.Load(); n != 1 {
				t.Fatalf("a completed request counted as cancelled (%d)", n)
			}
		})
	}
}

// load0 samples the rank's engine load.
func (r *rank) load0() mocker.Load {
	l, _ := r.load()
	return l
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waittest.Until(t, 10*time.Second, what, cond)
}
