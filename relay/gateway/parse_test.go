package gateway

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
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

// completionsBody is a completions body of n token ids drawn from a 50k
// vocabulary, as clients serialise pre-tokenized prompts.
func completionsBody(n int) []byte {
	rng := rand.New(rand.NewPCG(7, 11))
	b := []byte(`{"model":"m","max_tokens":16,"stream":true,"prompt":[`)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(rng.IntN(50000)), 10)
	}
	return append(b, "]}"...)
}

// BenchmarkParse compares, at 4,096 and 12,288 ids, the gateway's parse
// of a pre-tokenized completions body with decoding the same fields
// (model and the prompt's ids) by encoding/json, which is how the gateway
// parsed before it shared the node's parser.
func BenchmarkParse(b *testing.B) {
	for _, n := range []int{4096, 12288} {
		body := completionsBody(n)
		for _, p := range []struct {
			name  string
			parse func([]byte) ([]uint32, error)
		}{{"encoding-json", parseTokensJSON}, {"oaiedge", func(body []byte) ([]uint32, error) {
			r, err := parseRequest(body, endpointCompletions, math.MaxInt32)
			return r.Tokens, err
		}}} {
			b.Run(strconv.Itoa(n)+"/"+p.name, func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					if tokens, err := p.parse(body); err != nil || len(tokens) != n {
						b.Fatalf("%d tokens, err %v", len(tokens), err)
					}
				}
			})
		}
	}
}

// parseTokensJSON decodes a completions body's model and token ids with
// encoding/json: BenchmarkParse's baseline.
func parseTokensJSON(body []byte) ([]uint32, error) {
	var w struct {
		Model  string   `json:"model"`
		Prompt []uint32 `json:"prompt"`
	}
	err := json.Unmarshal(body, &w)
	return w.Prompt, err
}

// TestParsePooledMatchesParse checks that recycled token buffers give the
// same requests as fresh parsing, including after a refusal wrote into
// the buffer.
func TestParsePooledMatchesParse(t *testing.T) {
	bodies := []string{
		tokensBody("m", 300, false),
		`{"model":"m","prompt":[1,2,"x"]}`,
		tokensBody("m", 20, false),
		`{"model":"m","prompt":"text"}`,
		tokensBody("m", 4096, false),
	}
	for round := range 3 {
		for i, b := range bodies {
			want, wantErr := parseRequest([]byte(b), endpointCompletions, 10_000)
			got, buf, err := parseRequestPooled([]byte(b), endpointCompletions, 10_000)
			same := got.Model == want.Model && got.LoRA == want.LoRA && got.CacheSalt == want.CacheSalt && slices.Equal(got.Tokens, want.Tokens)
			if (err == nil) != (wantErr == nil) || !same {
				t.Fatalf("round %d body %d: pooled %+v, %v; fresh %+v, %v", round, i, got, err, want, wantErr)
			}
			releaseTokens(buf)
		}
	}
}
