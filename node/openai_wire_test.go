package node_test

import (
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/internal/oaiedge/oaiedgetest"
)

// TestOpenAIWireEndToEnd sends what an OpenAI client sends through a node
// to its engines, and reads the answers with the field names the official
// SDK reads: chat and text completions, whole and streamed, and the model
// list. TestOpenAIClientEndToEnd (`make test-sdk`) sends the same with the
// SDK itself.
func TestOpenAIWireEndToEnd(t *testing.T) {
	f := startFleet(t, 2, nil)
	c := &oaiedgetest.Client{Base: f.base}
	ctx := t.Context()
	msgs := func(s string) []map[string]any { return []map[string]any{{"role": "user", "content": s}} }
	chat, err := c.Create(ctx, "/v1/chat/completions", map[string]any{"model": model, "max_tokens": 4, "messages": msgs("hello")})
	if err != nil || len(chat.Choices) != 1 || chat.Choices[0].Message.Content == "" || chat.Object != "chat.completion" {
		t.Fatalf("chat: %v %+v", err, chat)
	}
	stream := c.Stream(ctx, "/v1/chat/completions", map[string]any{"model": model, "max_tokens": 5, "messages": msgs("stream please"),
		"stream": true, "stream_options": map[string]any{"include_usage": true}})
	var text strings.Builder
	var usage int64
	for stream.Next() {
		ch := stream.Current()
		if len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
		if ch.Usage.CompletionTokens > 0 {
			usage = ch.Usage.CompletionTokens
		}
	}
	if err := stream.Err(); err != nil || text.Len() == 0 || usage != 5 {
		t.Fatalf("chat stream: %v %q usage %d", err, text.String(), usage)
	}
	comp, err := c.Create(ctx, "/v1/completions", map[string]any{"model": model, "max_tokens": 3, "prompt": "once upon a time"})
	if err != nil || len(comp.Choices) != 1 || comp.Usage.CompletionTokens != 3 || comp.Object != "text_completion" {
		t.Fatalf("completion: %v %+v", err, comp)
	}
	cs := c.Stream(ctx, "/v1/completions", map[string]any{"model": model, "max_tokens": 3, "prompt": "streamed", "stream": true})
	chunks := 0
	for cs.Next() {
		chunks++
	}
	if err := cs.Err(); err != nil || chunks < 3 {
		t.Fatalf("completion stream: %v, %d chunks", err, chunks)
	}
	models, err := c.Models(ctx)
	if err != nil || len(models) != 1 || models[0] != model {
		t.Fatalf("models: %v %v", err, models)
	}
}
