package frontend

import (
	"math"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name      string
		ep        oaiedge.Endpoint
		body      string
		model     string
		stream    bool
		usage     bool
		maxTokens int
		tokens    []uint32
		text      string
		lora      string
		salt      string
	}{
		// The parser itself is tested in internal/oaiedge; these check that
		// every field reaches the node's request.
		{name: "chat fields", ep: oaiedge.Chat,
			body:  `{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":7,"messages":[{"role":"user","content":"hi"}],"kvrouter":{"lora":"l"},"cache_salt":"s"}`,
			model: "m", stream: true, usage: true, maxTokens: 7, text: "user\nhi\n", lora: "l", salt: "s"},
		{name: "chat token ids", ep: oaiedge.Chat, body: `{"model":"m","messages":[{"role":"user","content":"x"}],"kvrouter":{"token_ids":[1,2,3]}}`, model: "m", tokens: []uint32{1, 2, 3}},
		{name: "completions ints", ep: oaiedge.Completions, body: `{"model":"m","prompt":[0,4294967295],"max_tokens":3}`, model: "m", maxTokens: 3, tokens: []uint32{0, math.MaxUint32}},
		{name: "completions string", ep: oaiedge.Completions, body: `{"model":"m","prompt":"abc"}`, model: "m", text: "abc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parseRequest([]byte(tc.body), tc.ep, 100)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Release()
			if p.Model != tc.model || p.Stream != tc.stream || p.IncludeUsage != tc.usage || p.MaxTokens != tc.maxTokens ||
				!equalTokens(p.Tokens, tc.tokens) || p.Text != tc.text || p.LoRA != tc.lora || p.CacheSalt != tc.salt {
				t.Fatalf("parsed %+v", p)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	tests := []struct {
		name string
		body string
		code string // "" for none
	}{
		{name: "at limit", body: `{"model":"m","prompt":[1,2,3,4]}`},
		{name: "over limit", body: `{"model":"m","prompt":[1,2,3,4,5]}`, code: "context_length_exceeded"},
		{name: "batch member over limit", body: `{"model":"m","prompt":[[1],[1,2,3,4,5]]}`, code: "context_length_exceeded"},
		{name: "text over limit", body: `{"model":"m","prompt":"` + strings.Repeat("x", 17) + `"}`, code: "context_length_exceeded"},
		{name: "token over 2^32", body: `{"model":"m","prompt":[4294967296]}`, code: "invalid_request"},
		{name: "leading zero", body: `{"model":"m","prompt":[01]}`, code: "invalid_request"},
		{name: "exponent", body: `{"model":"m","prompt":[1e2]}`, code: "invalid_request"},
		{name: "deep nesting", body: `{"model":"m","prompt":"x","x":` + strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1) + `}`, code: "invalid_request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parseRequest([]byte(tc.body), oaiedge.Completions, 4)
			p.Release()
			if tc.code == "" && err != nil || tc.code != "" && errorTable(529).Classify(err).Code != tc.code {
				t.Fatalf("err %v, want %q", err, tc.code)
			}
		})
	}
}

func FuzzInspectChunk(f *testing.F) {
	f.Add([]byte(`{"choices":[{"delta":{"content":"x"}}],"usage":{"completion_tokens":3}}`))
	f.Add([]byte(`{"choices":[{"text":"x"}],"usage":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		o := observation{promptTokens: -1, completionTokens: -1}
		o.inspectChunk(data)
	})
}

// TestParseErrorsKeepParam checks that the parser's refusals reach the
// error table with their parameter and class.
func TestParseErrorsKeepParam(t *testing.T) {
	tests := []struct {
		name, body, param, code string
	}{
		{name: "malformed", body: `{`, code: "invalid_request"},
		{name: "wrong type", body: `{"model":1,"prompt":"x"}`, param: "model", code: "invalid_request"},
		{name: "too long", body: `{"model":"m","prompt":[1,2,3]}`, param: "prompt", code: "context_length_exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRequest([]byte(tc.body), oaiedge.Completions, 2)
			c := errorTable(529).Classify(err)
			if c.Status != 400 || c.Code != tc.code || oaiedge.ParamOf(err) != tc.param {
				t.Fatalf("err %v param %q class %+v, want %q %q", err, oaiedge.ParamOf(err), c, tc.param, tc.code)
			}
		})
	}
}

// TestLimitsMatchParser checks that the node's documented limits are the
// parser's.
func TestLimitsMatchParser(t *testing.T) {
	if MaxJSONDepth != oaiedge.MaxJSONDepth {
		t.Fatalf("MaxJSONDepth %d, parser %d", MaxJSONDepth, oaiedge.MaxJSONDepth)
	}
}

// TestInspectChunk checks the response inspection through the scanner
// adapter: the cursor is shared by nested calls, so usage after choices is
// read.
func TestInspectChunk(t *testing.T) {
	tests := []struct {
		name, chunk      string
		content, failed  bool
		prompt, complete int
	}{
		{name: "delta then usage", chunk: `{"choices":[{"delta":{"role":"assistant","content":"x"}}],"usage":{"prompt_tokens":5,"completion_tokens":3}}`, content: true, prompt: 5, complete: 3},
		{name: "empty text", chunk: `{"choices":[{"text":""}],"usage":null}`, prompt: -1, complete: -1},
		{name: "error", chunk: `{"error":{"message":"x"},"usage":{"completion_tokens":1}}`, failed: true, prompt: -1, complete: 1},
		{name: "malformed", chunk: `{"choices":[`, prompt: -1, complete: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := observation{promptTokens: -1, completionTokens: -1}
			content := o.inspectChunk([]byte(tc.chunk))
			if content != tc.content || o.streamError != tc.failed || o.promptTokens != tc.prompt || o.completionTokens != tc.complete {
				t.Fatalf("content %v error %v usage %d/%d", content, o.streamError, o.promptTokens, o.completionTokens)
			}
		})
	}
}
