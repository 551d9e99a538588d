package oaiedge

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// parseReusing is Parse with the first token id array of the body parsed
// into scratch[:0], the buffer behind ParsePooled, so that tests see which
// buffer a parse used (Request.scratch).
func parseReusing(body []byte, ep Endpoint, o Options, scratch []uint32) (Request, error) {
	return parse(body, ep, o, scratch, true)
}

// completions parses a completions body into scratch.
func completions(body []byte, limit int, scratch []uint32) (Request, error) {
	return parseReusing(body, Completions, Options{MaxPromptTokens: limit}, scratch)
}

// refusal returns the kind and param of err, which must be an *Error.
func refusal(t testing.TB, err error) (kind error, param string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	return e.Kind, e.Param
}

func TestParseNode(t *testing.T) {
	tests := []struct {
		name      string
		ep        Endpoint
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
		{name: "chat minimal", ep: Chat, body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, model: "m", text: "user\nhi\n"},
		{name: "chat parts and nulls", ep: Chat,
			body:  `{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":5,"max_completion_tokens":7,"user":null,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"text":"b","type":"text"}]},{"role":"assistant","content":null,"tool_calls":[]}]}`,
			model: "m", stream: true, usage: true, maxTokens: 7, text: "user\nab\nassistant\n\n"},
		{name: "chat escapes", ep: Chat, body: `{"mod\u0065l":"m\u00e9","messages":[{"role":"user","content":"a\nb\ud83d\ude00"}]}`, model: "mé", text: "user\na\nb😀\n"},
		{name: "chat token ids and extension", ep: Chat, body: `{"model":"m","messages":[{"role":"user","content":"x"}],"kvrouter":{"token_ids":[1, 2 ,3],"lora":"l","other":1},"cache_salt":"s"}`, model: "m", tokens: []uint32{1, 2, 3}, lora: "l", salt: "s"},
		{name: "completions string", ep: Completions, body: `{"model":"m","prompt":"abc","max_tokens":3}`, model: "m", maxTokens: 3, text: "abc"},
		{name: "completions ints", ep: Completions, body: ` { "prompt" : [ 0 , 4294967295 ] , "model" : "m" } `, model: "m", tokens: []uint32{0, math.MaxUint32}},
		{name: "completions int arrays", ep: Completions, body: `{"model":"m","prompt":[[9,8],[7]]}`, model: "m", tokens: []uint32{9, 8}},
		{name: "completions strings", ep: Completions, body: `{"model":"m","prompt":["p","q"]}`, model: "m", text: "p"},
		{name: "duplicate key last wins", ep: Completions, body: `{"model":"a","model":"b","prompt":"x"}`, model: "b", text: "x"},
		{name: "messages ignored on completions", ep: Completions, body: `{"model":"m","prompt":"x","messages":5}`, model: "m", text: "x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.body), tc.ep, Options{MaxPromptTokens: 100})
			if err != nil {
				t.Fatal(err)
			}
			if r.Endpoint != tc.ep || r.Model != tc.model || r.Stream != tc.stream || r.IncludeUsage != tc.usage || r.MaxTokens != tc.maxTokens ||
				!slices.Equal(r.Tokens, tc.tokens) || r.Text != tc.text || r.LoRA != tc.lora || r.CacheSalt != tc.salt {
				t.Fatalf("parsed %+v", r)
			}
		})
	}
}

// TestParseKeepsNVExt checks that the parse hands back the top-level
// "nvext" value as it is in the body, of whatever type, and nothing for a
// member of that name deeper in the body.
func TestParseKeepsNVExt(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"object", `{"model":"m","prompt":"x","nvext":{"agent_hints":{"priority":2}}}`, `{"agent_hints":{"priority":2}}`},
		{"spaced", `{"model":"m","prompt":"x","nvext" :  [1, 2] }`, `[1, 2]`},
		{"last wins", `{"nvext":1,"model":"m","prompt":"x","nvext":"s"}`, `"s"`},
		{"null is absent", `{"model":"m","prompt":"x","nvext":null}`, ``},
		{"absent", `{"model":"m","prompt":"x"}`, ``},
		{"nested is not top-level", `{"model":"m","prompt":"x","user":"nvext","stream_options":{"nvext":{}}}`, ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.body), Completions, Options{MaxPromptTokens: 100})
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(string(r.NVExt)) != tc.want || (tc.want == "") != (r.NVExt == nil) {
				t.Fatalf("nvext %q, want %q", r.NVExt, tc.want)
			}
		})
	}
}

// TestNodeRefusals checks the kind and param of each refusal:
// the parameter is what the OpenAI error body names.
func TestNodeRefusals(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name  string
		ep    Endpoint
		body  string
		kind  error
		param string
	}{
		{name: "not json", ep: Chat, body: `{"model":`, kind: ErrMalformed},
		{name: "not an object", ep: Chat, body: `[1]`, kind: ErrInvalid},
		{name: "trailing garbage", ep: Chat, body: `{"model":"m",` + msgs + `} x`, kind: ErrMalformed},
		{name: "model wrong type", ep: Chat, body: `{"model":1,` + msgs + `}`, kind: ErrInvalid, param: "model"},
		{name: "model missing", ep: Chat, body: `{` + msgs + `}`, kind: ErrInvalid, param: "model"},
		{name: "stream wrong type", ep: Chat, body: `{"model":"m","stream":"yes",` + msgs + `}`, kind: ErrInvalid, param: "stream"},
		{name: "include_usage wrong type", ep: Chat, body: `{"model":"m","stream_options":{"include_usage":1},` + msgs + `}`, kind: ErrInvalid, param: "stream_options.include_usage"},
		{name: "max_tokens negative", ep: Chat, body: `{"model":"m","max_tokens":-1,` + msgs + `}`, kind: ErrInvalid, param: "max_tokens"},
		{name: "max_completion_tokens fraction", ep: Chat, body: `{"model":"m","max_completion_tokens":1.5,` + msgs + `}`, kind: ErrInvalid, param: "max_completion_tokens"},
		{name: "messages empty", ep: Chat, body: `{"model":"m","messages":[]}`, kind: ErrInvalid, param: "messages"},
		{name: "messages missing", ep: Chat, body: `{"model":"m"}`, kind: ErrInvalid, param: "messages"},
		{name: "content wrong type", ep: Chat, body: `{"model":"m","messages":[{"role":"user","content":5}]}`, kind: ErrInvalid, param: "messages[0].content"},
		{name: "role wrong type", ep: Chat, body: `{"model":"m","messages":[{},{"role":5}]}`, kind: ErrInvalid, param: "messages[1].role"},
		{name: "message not object", ep: Chat, body: `{"model":"m","messages":["hi"]}`, kind: ErrInvalid, param: "messages[0]"},
		{name: "token_ids wrong type", ep: Chat, body: `{"model":"m",` + msgs + `,"kvrouter":{"token_ids":["a"]}}`, kind: ErrInvalid, param: "kvrouter.token_ids"},
		{name: "token_ids empty", ep: Chat, body: `{"model":"m",` + msgs + `,"kvrouter":{"token_ids":[]}}`, kind: ErrInvalid, param: "kvrouter.token_ids"},
		{name: "token_ids over the limit", ep: Chat, body: `{"model":"m",` + msgs + `,"kvrouter":{"token_ids":[1,2,3,4,5]}}`, kind: ErrPromptTooLong, param: "kvrouter.token_ids"},
		{name: "kvrouter wrong type", ep: Chat, body: `{"model":"m",` + msgs + `,"kvrouter":[]}`, kind: ErrInvalid, param: "kvrouter"},
		{name: "lora wrong type", ep: Chat, body: `{"model":"m",` + msgs + `,"kvrouter":{"lora":1}}`, kind: ErrInvalid, param: "kvrouter.lora"},
		{name: "cache_salt wrong type", ep: Chat, body: `{"model":"m",` + msgs + `,"cache_salt":{}}`, kind: ErrInvalid, param: "cache_salt"},
		{name: "prompt missing", ep: Completions, body: `{"model":"m"}`, kind: ErrInvalid, param: "prompt"},
		{name: "prompt empty", ep: Completions, body: `{"model":"m","prompt":""}`, kind: ErrInvalid, param: "prompt"},
		{name: "prompt empty array", ep: Completions, body: `{"model":"m","prompt":[]}`, kind: ErrInvalid, param: "prompt"},
		{name: "prompt first of batch empty", ep: Completions, body: `{"model":"m","prompt":[[],[1]]}`, kind: ErrInvalid, param: "prompt"},
		{name: "prompt negative token", ep: Completions, body: `{"model":"m","prompt":[1,-2]}`, kind: ErrInvalid, param: "prompt"},
		{name: "prompt object", ep: Completions, body: `{"model":"m","prompt":{}}`, kind: ErrInvalid, param: "prompt"},
		{name: "text prompt over the limit", ep: Completions, body: `{"model":"m","prompt":"` + strings.Repeat("x", 17) + `"}`, kind: ErrPromptTooLong, param: "prompt"},
		{name: "first fault in document order", ep: Completions, body: `{"prompt":[-1],"model":5}`, kind: ErrInvalid, param: "prompt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.body), tc.ep, Options{MaxPromptTokens: 4})
			kind, param := refusal(t, err)
			if kind != tc.kind || param != tc.param {
				t.Fatalf("%v: kind %v param %q, want %v %q", err, kind, param, tc.kind, tc.param)
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
		{name: "over limit", body: `{"model":"m","prompt":[1,2,3,4,5]}`, want: ErrPromptTooLong},
		{name: "batch member over limit", body: `{"model":"m","prompt":[[1],[1,2,3,4,5]]}`, want: ErrPromptTooLong},
		{name: "text at limit", body: `{"model":"m","prompt":"` + strings.Repeat("x", 16) + `"}`},
		{name: "text over limit", body: `{"model":"m","prompt":"` + strings.Repeat("x", 17) + `"}`, want: ErrPromptTooLong},
		{name: "token over 2^32", body: `{"model":"m","prompt":[4294967296]}`, want: ErrInvalid},
		{name: "leading zero", body: `{"model":"m","prompt":[01]}`, want: ErrMalformed},
		{name: "exponent", body: `{"model":"m","prompt":[1e2]}`, want: ErrInvalid},
		{name: "deep nesting", body: `{"model":"m","prompt":"x","x":` + strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1) + `}`, want: ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.body), Completions, Options{MaxPromptTokens: 4})
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

// TestTextBytesPerToken checks that the text estimate follows the option.
func TestTextBytesPerToken(t *testing.T) {
	body := []byte(`{"model":"m","prompt":"` + strings.Repeat("x", 10) + `"}`)
	tests := []struct {
		name   string
		bpt    int
		tokens int
	}{
		{name: "default", bpt: 0, tokens: 3},
		{name: "one byte each", bpt: 1, tokens: 10},
		{name: "ten bytes each", bpt: 10, tokens: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse(body, Completions, Options{MaxPromptTokens: 100, TextBytesPerToken: tc.bpt})
			if err != nil || r.PromptTokens() != tc.tokens {
				t.Fatalf("%d tokens, err %v; want %d", r.PromptTokens(), err, tc.tokens)
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
		p, err := Parse([]byte(body), Completions, Options{MaxPromptTokens: 1 << 20})
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
		if err := json.Unmarshal([]byte(body), &want); err != nil || !slices.Equal(p.Tokens, want.Prompt) {
			t.Fatalf("tokens %v, encoding/json %v (%v)", p.Tokens, want.Prompt, err)
		}
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

// TestParseReusingDoesNotAllocate checks that a pre-tokenized prompt
// parsed into a large enough scratch buffer costs no allocation (a
// one-byte model name is a static string).
func TestParseReusingDoesNotAllocate(t *testing.T) {
	body := tokenBody(4096)
	scratch := make([]uint32, 0, 8192)
	o := Options{MaxPromptTokens: 1 << 20}
	allocs := testing.AllocsPerRun(20, func() {
		r, err := parseReusing(body, Completions, o, scratch)
		if err != nil || len(r.Tokens) != 4096 || &r.scratch[0] != &scratch[:1][0] {
			t.Fatalf("%d tokens, err %v, or not in the scratch buffer", len(r.Tokens), err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
}
