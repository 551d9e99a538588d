package frontend

import "testing"

func TestUsageCachedTokens(t *testing.T) {
	tests := []struct {
		name          string
		chunk         string
		cached        int
		hasCached     bool
		prompt, compl int
	}{
		{name: "vllm usage", chunk: `{"usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":64}}}`,
			cached: 64, hasCached: true, prompt: 100, compl: 5},
		{name: "details null", chunk: `{"usage":{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":null}}`, prompt: 10, compl: 1},
		{name: "cached null", chunk: `{"usage":{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":null}}}`, prompt: 10, compl: -1},
		{name: "no details", chunk: `{"usage":{"prompt_tokens":10,"completion_tokens":2}}`, prompt: 10, compl: 2},
		{name: "other details", chunk: `{"usage":{"prompt_tokens":7,"prompt_tokens_details":{"audio_tokens":0,"cached_tokens":3}}}`,
			cached: 3, hasCached: true, prompt: 7, compl: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := observation{promptTokens: -1, completionTokens: -1}
			o.inspectChunk([]byte(tc.chunk))
			if o.cachedTokens != tc.cached || o.hasCached != tc.hasCached || o.promptTokens != tc.prompt || o.completionTokens != tc.compl {
				t.Fatalf("got cached %d (%v), prompt %d, completion %d", o.cachedTokens, o.hasCached, o.promptTokens, o.completionTokens)
			}
		})
	}
}
