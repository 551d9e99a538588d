package server

import (
	"context"
	"testing"
	"time"
)

// BenchmarkChatStreamed measures one streamed chat completion of 16 tokens
// end to end over loopback HTTP, with the engine sped up 1000x so that the
// figure is the serving overhead (parsing, driver wake-ups, SSE writes),
// not the modelled GPU time.
func BenchmarkChatStreamed(b *testing.B) {
	h := startHarness(b, func(c *Config) { c.Engine.SpeedUp = 1000; c.Engine.NumBlocks = 4096 }, nil)
	client := h.client()
	params := chat("benchmark prompt of a few words", 16, true)
	start := time.Now()
	chunks := 0
	for b.Loop() {
		stream := client.Stream(context.Background(), "/v1/chat/completions", params)
		for stream.Next() {
			chunks++
		}
		if err := stream.Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(chunks)/time.Since(start).Seconds(), "chunks/s")
}

// BenchmarkParseChat measures decoding a chat request carrying 8k token ids
// in the kvrouter extension, the per-request cost before the engine.
func BenchmarkParseChat(b *testing.B) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"x"}],"kvrouter":{"token_ids":[`)
	for i := range 8192 {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, "123456"...)
	}
	body = append(body, "]}}"...)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := parseChat(body, limits{def: 16, max: 100}); err != nil {
			b.Fatal(err)
		}
	}
}
