package frontend

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name      string
		ep        endpoint
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
		{name: "chat fields", ep: endpointChat,
			body:  `{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":7,"messages":[{"role":"user","content":"hi"}],"kvrouter":{"lora":"l"},"cache_salt":"s"}`,
			model: "m", stream: true, usage: true, maxTokens: 7, text: "user\nhi\n", lora: "l", salt: "s"},
		{name: "chat token ids", ep: endpointChat, body: `{"model":"m","messages":[{"role":"user","content":"x"}],"kvrouter":{"token_ids":[1,2,3]}}`, model: "m", tokens: []uint32{1, 2, 3}},
		{name: "completions ints", ep: endpointCompletions, body: `{"model":"m","prompt":[0,4294967295],"max_tokens":3}`, model: "m", maxTokens: 3, tokens: []uint32{0, math.MaxUint32}},
		{name: "completions string", ep: endpointCompletions, body: `{"model":"m","prompt":"abc"}`, model: "m", text: "abc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parseRequest([]byte(tc.body), tc.ep, 100)
			if err != nil {
				t.Fatal(err)
			}
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
		want error
	}{
		{name: "at limit", body: `{"model":"m","prompt":[1,2,3,4]}`},
		{name: "over limit", body: `{"model":"m","prompt":[1,2,3,4,5]}`, want: dispatch.ErrPromptTooLong},
		{name: "batch member over limit", body: `{"model":"m","prompt":[[1],[1,2,3,4,5]]}`, want: dispatch.ErrPromptTooLong},
		{name: "text over limit", body: `{"model":"m","prompt":"` + strings.Repeat("x", 17) + `"}`, want: dispatch.ErrPromptTooLong},
		{name: "token over 2^32", body: `{"model":"m","prompt":[4294967296]}`, want: ErrInvalidRequest},
		{name: "leading zero", body: `{"model":"m","prompt":[01]}`, want: ErrInvalidRequest},
		{name: "exponent", body: `{"model":"m","prompt":[1e2]}`, want: ErrInvalidRequest},
		{name: "deep nesting", body: `{"model":"m","prompt":"x","x":` + strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1) + `}`, want: ErrInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRequest([]byte(tc.body), endpointCompletions, 4)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
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

// TestPooledBufferNotSharedByTwoArrays checks that a body with both a
// prompt token array and the kvrouter.token_ids extension keeps both
// arrays intact, whichever comes first, and that release recycles the
// buffer the first array was parsed into.
func TestPooledBufferNotSharedByTwoArrays(t *testing.T) {
	tests := []struct{ name, body string }{
		{name: "extension first", body: `{"model":"m","kvrouter":{"token_ids":[1,2,3]},"prompt":[7,8,9,10]}`},
		{name: "prompt first", body: `{"model":"m","prompt":[7,8,9,10],"kvrouter":{"token_ids":[1,2,3]}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			buf := new([]uint32)
			p, err := parseRequestPooled([]byte(tc.body), endpointCompletions, 100, buf)
			if err != nil || !equalTokens(p.Tokens, []uint32{1, 2, 3}) {
				t.Fatalf("tokens %v, err %v", p.Tokens, err)
			}
			p.release()
			if cap(*buf) == 0 || p.buf != nil {
				t.Fatalf("release kept no buffer (cap %d) or did not let go of it", cap(*buf))
			}
		})
	}
}

// TestParseErrorsKeepParam checks that the parser's refusals arrive as the
// frontend's request errors, with their parameter.
func TestParseErrorsKeepParam(t *testing.T) {
	tests := []struct {
		name, body, param string
		kind              error
	}{
		{name: "malformed", body: `{`, kind: ErrInvalidRequest},
		{name: "wrong type", body: `{"model":1,"prompt":"x"}`, param: "model", kind: ErrInvalidRequest},
		{name: "too long", body: `{"model":"m","prompt":[1,2,3]}`, param: "prompt", kind: dispatch.ErrPromptTooLong},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRequestPooled([]byte(tc.body), endpointCompletions, 2, getTokens())
			if !errors.Is(err, tc.kind) || paramOf(err) != tc.param {
				t.Fatalf("err %v param %q, want %v %q", err, paramOf(err), tc.kind, tc.param)
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

// BenchmarkParseTokenPromptPooled is BenchmarkParseTokenPrompt the way the
// handler parses: into a recycled token buffer.
func BenchmarkParseTokenPromptPooled(b *testing.B) {
	body := tokenBody(12288, 1)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		p, err := parseRequestPooled(body, endpointCompletions, MaxPromptTokens, getTokens())
		if err != nil {
			b.Fatal(err)
		}
		p.release()
	}
}
