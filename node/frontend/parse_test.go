package frontend

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"pgregory.net/rapid"

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
		{name: "chat minimal", ep: endpointChat, body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, model: "m", text: "user\nhi\n"},
		{name: "chat parts and nulls", ep: endpointChat,
			body:  `{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":5,"max_completion_tokens":7,"user":null,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"text":"b","type":"text"}]},{"role":"assistant","content":null,"tool_calls":[]}]}`,
			model: "m", stream: true, usage: true, maxTokens: 7, text: "user\nab\nassistant\n\n"},
		{name: "chat escapes", ep: endpointChat, body: `{"mod\u0065l":"m\u00e9","messages":[{"role":"user","content":"a\nb\ud83d\ude00"}]}`, model: "mé", text: "user\na\nb😀\n"},
		{name: "chat token ids and extension", ep: endpointChat, body: `{"model":"m","messages":[{"role":"user","content":"x"}],"kvrouter":{"token_ids":[1, 2 ,3],"lora":"l","other":1},"cache_salt":"s"}`, model: "m", tokens: []uint32{1, 2, 3}, lora: "l", salt: "s"},
		{name: "completions string", ep: endpointCompletions, body: `{"model":"m","prompt":"abc","max_tokens":3}`, model: "m", maxTokens: 3, text: "abc"},
		{name: "completions ints", ep: endpointCompletions, body: ` { "prompt" : [ 0 , 4294967295 ] , "model" : "m" } `, model: "m", tokens: []uint32{0, math.MaxUint32}},
		{name: "completions int arrays", ep: endpointCompletions, body: `{"model":"m","prompt":[[9,8],[7]]}`, model: "m", tokens: []uint32{9, 8}},
		{name: "completions strings", ep: endpointCompletions, body: `{"model":"m","prompt":["p","q"]}`, model: "m", text: "p"},
		{name: "duplicate key last wins", ep: endpointCompletions, body: `{"model":"a","model":"b","prompt":"x"}`, model: "b", text: "x"},
		{name: "messages ignored on completions", ep: endpointCompletions, body: `{"model":"m","prompt":"x","messages":5}`, model: "m", text: "x"},
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

// TestTokenArrayMatchesEncodingJSON checks the fast token reader against
// encoding/json on generated arrays, including whitespace and values at
// the edges of the range.
func TestTokenArrayMatchesEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids := rapid.SliceOf(rapid.OneOf(rapid.Uint32(), rapid.Uint32Range(0, 9), rapid.Just(uint32(math.MaxUint32)))).Draw(t, "ids")
		sep := rapid.SampledFrom([]string{",", " ,", ", ", "\n,\t"}).Draw(t, "sep")
		parts := make([]string, len(ids))
		for i, v := range ids {
			parts[i] = fmt.Sprint(v)
		}
		body := `{"model":"m","prompt":[` + strings.Join(parts, sep) + `]}`
		p, err := parseRequest([]byte(body), endpointCompletions, 1<<20)
		if len(ids) == 0 {
			if err == nil {
				t.Fatal("empty prompt accepted")
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		var want struct{ Prompt []uint32 }
		if err := json.Unmarshal([]byte(body), &want); err != nil || !equalTokens(p.Tokens, want.Prompt) {
			t.Fatalf("tokens %v, encoding/json %v (%v)", p.Tokens, want.Prompt, err)
		}
	})
}

// checkAgainstEncodingJSON is the fuzz oracle: the parser never panics,
// refuses every body encoding/json refuses, never reports a syntax error
// for a body encoding/json accepts, and agrees with it on the model.
func checkAgainstEncodingJSON(t *testing.T, body []byte, ep endpoint) {
	p, err := parseRequest(body, ep, 1<<16)
	valid := json.Valid(body)
	if !valid && err == nil {
		t.Fatalf("accepted invalid JSON %q", body)
	}
	if valid && err != nil && strings.Contains(err.Error(), "malformed JSON") {
		t.Fatalf("refused valid JSON %q as malformed: %v", body, err)
	}
	if err != nil {
		if !errors.Is(err, ErrInvalidRequest) && !errors.Is(err, dispatch.ErrPromptTooLong) {
			t.Fatalf("unclassified error %v", err)
		}
		return
	}
	var ref struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(body, &ref) == nil && ref.Model != p.Model {
		t.Fatalf("model %q, encoding/json %q", p.Model, ref.Model)
	}
}

func fuzzSeeds(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a\u00e9"}]}],"kvrouter":{"token_ids":[1,2]}}`,
		`{"model":"m","prompt":[1,2,3],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","prompt":[[1],[2,3]],"max_tokens":4}`,
		`{"model":"m","prompt":["a","b"],"cache_salt":"s"}`,
		`{"model":"m","prompt":-0.5e+3}`, `{"a":[{},[],null,true,false,"\"\\\/\b\f\n\r\t"]}`, `{`, `[`, `"x"`, ``,
	} {
		f.Add([]byte(s))
	}
}

func FuzzParseChat(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) { checkAgainstEncodingJSON(t, body, endpointChat) })
}

func FuzzParseCompletions(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) { checkAgainstEncodingJSON(t, body, endpointCompletions) })
}

func FuzzInspectChunk(f *testing.F) {
	f.Add([]byte(`{"choices":[{"delta":{"content":"x"}}],"usage":{"completion_tokens":3}}`))
	f.Add([]byte(`{"choices":[{"text":"x"}],"usage":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		o := observation{promptTokens: -1, completionTokens: -1}
		o.inspectChunk(data)
	})
}

// TestPlainTokenMatchesLoop checks the eight-byte digit conversion against
// the byte loop for every digit count and what may follow the digits.
func TestPlainTokenMatchesLoop(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		digits := rapid.StringMatching(`[0-9]{1,11}`).Draw(t, "digits")
		tail := rapid.StringMatching(`[ ,\]\.eE0-9a\x00\xff]{0,9}`).Draw(t, "tail")
		b := []byte(digits + tail)
		v, next, ok := plainToken(b, 0)
		wv, wnext, wok := loopToken(b, 0)
		if v != wv || next != wnext || ok != wok {
			t.Fatalf("%q: got %d %d %v, loop %d %d %v", b, v, next, ok, wv, wnext, wok)
		}
	})
}
