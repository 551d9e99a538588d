package gateway

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name       string
		ep         endpoint
		body       string
		wantTokens []uint32
		wantLoRA   string
		wantSalt   string
	}{
		{name: "text prompt", ep: endpointCompletions, body: `{"model":"m","prompt":"hello"}`},
		{name: "token prompt", ep: endpointCompletions, body: `{"model":"m","prompt":[1,2,3]}`, wantTokens: []uint32{1, 2, 3}},
		{name: "batch of token prompts routes on the first", ep: endpointCompletions, body: `{"model":"m","prompt":[[4,5],[6]]}`, wantTokens: []uint32{4, 5}},
		{name: "batch of strings", ep: endpointCompletions, body: `{"model":"m","prompt":["a","b"]}`},
		{name: "extension wins", ep: endpointCompletions, body: `{"model":"m","prompt":[1],"kvrouter":{"token_ids":[9,8],"lora":"l"}}`, wantTokens: []uint32{9, 8}, wantLoRA: "l"},
		{name: "chat with token ids", ep: endpointChat, body: `{"model":"m","messages":[{"role":"user","content":"x"}],"kvrouter":{"token_ids":[7]},"cache_salt":"s"}`, wantTokens: []uint32{7}, wantSalt: "s"},
		{name: "chat text", ep: endpointChat, body: `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"other":{"a":[1]}}`},
		{name: "null extension", ep: endpointChat, body: `{"model":"m","messages":[{}],"kvrouter":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parseRequest([]byte(tt.body), tt.ep, 100)
			if err != nil {
				t.Fatal(err)
			}
			if r.Model != "m" || !slices.Equal(r.Tokens, tt.wantTokens) || r.LoRA != tt.wantLoRA || r.CacheSalt != tt.wantSalt {
				t.Fatalf("parsed %+v", r)
			}
		})
	}
}

// FuzzParseRequest checks that any body parses or fails with a request
// error, never a panic or another error.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{`{"model":"m","prompt":[1,2]}`, `{"model":"m","messages":[{}],"kvrouter":{"token_ids":[1]}}`,
		`{"model":"m","prompt":[[1],[2]]}`, `[]`, `{"prompt":[-1]}`, `{"model":"m","prompt":["",""]}`} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		ep := endpointCompletions
		if chat {
			ep = endpointChat
		}
		r, err := parseRequest(body, ep, 64)
		if err != nil && !errors.Is(err, ErrInvalidRequest) && !errors.Is(err, ErrPromptTooLong) {
			t.Fatalf("error %v is not a request error", err)
		}
		if err == nil && (r.Model == "" || len(r.Tokens) > 64) {
			t.Fatalf("accepted %+v", r)
		}
	})
}

func TestParseTokensMatchesEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids := rapid.SliceOf(rapid.Uint32()).Draw(t, "ids")
		ws := rapid.SampledFrom([]string{"", " ", "\n\t"}).Draw(t, "ws")
		var b strings.Builder
		b.WriteString("[" + ws)
		for i, id := range ids {
			if i > 0 {
				b.WriteString(ws + "," + ws)
			}
			b.WriteString(strconv.FormatUint(uint64(id), 10))
		}
		b.WriteString(ws + "]")
		got, err := parseTokens([]byte(b.String()), 1<<20)
		var want []uint32
		if jerr := json.Unmarshal([]byte(b.String()), &want); jerr != nil || err != nil || !slices.Equal(got, want) {
			t.Fatalf("parseTokens(%q) = %v, %v; encoding/json %v, %v", b.String(), got, err, want, jerr)
		}
	})
}

func TestParseTokensRefuses(t *testing.T) {
	tests := []struct {
		name, raw string
		limit     int
		want      error
	}{
		{name: "negative", raw: `[1,-1]`, limit: 9, want: errNotTokens},
		{name: "fraction", raw: `[1.5]`, limit: 9, want: errNotTokens},
		{name: "exponent", raw: `[1e3]`, limit: 9, want: errNotTokens},
		{name: "too large", raw: `[4294967296]`, limit: 9, want: errNotTokens},
		{name: "string", raw: `["1"]`, limit: 9, want: errNotTokens},
		{name: "not an array", raw: `{}`, limit: 9, want: errNotTokens},
		{name: "over the limit", raw: `[1,2,3]`, limit: 2, want: ErrPromptTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseTokens([]byte(tt.raw), tt.limit); !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
		})
	}
}
