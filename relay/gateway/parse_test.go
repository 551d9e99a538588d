package gateway

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

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
// parsed before it shared the node's parser (internal/oaiedge).
func BenchmarkParse(b *testing.B) {
	for _, n := range []int{4096, 12288} {
		body := completionsBody(n)
		for _, p := range []struct {
			name  string
			parse func([]byte) ([]uint32, error)
		}{{"encoding-json", parseTokensJSON}, {"oaiedge", func(body []byte) ([]uint32, error) {
			r, err := oaiedge.Parse(body, oaiedge.Completions, oaiedge.Options{MaxPromptTokens: math.MaxInt32})
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
