package gateway

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/tokenize"
)

func TestExplainSaysWhereTheTokensCameFrom(t *testing.T) {
	tok, err := tokenize.Load("../../tokenize/testdata/qwen3")
	if err != nil {
		t.Fatal(err)
	}
	node := newFakeNode(t, "n1", "m", "other")
	g := newGateway(t, Config{DC: "a", Nodes: []string{node.srv.URL}, DefaultBlockSize: 4,
		Tokenizers: map[string]*tokenize.Tokenizer{"m": tok}})
	long := "The quick brown fox jumps over the lazy dog, again and again, until the dog wakes up."
	tests := []struct {
		name, body, tokens string
		blocks             bool
	}{
		{"text with a tokenizer", `{"model":"m","prompt":"` + long + `"}`, oaiedge.TokensExact, true},
		{"text without one", `{"model":"other","prompt":"` + long + `"}`, oaiedge.TokensApproximate, false},
		{"token ids", `{"model":"other","prompt":[1,2,3,4,5,6,7,8]}`, oaiedge.TokensClient, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := postHandler(t, g, "/v1/route/explain", tc.body, nil)
			var out explanation
			if code != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil {
				t.Fatalf("status %d: %s", code, body)
			}
			if out.Tokens != tc.tokens || (out.Blocks > 0) != tc.blocks {
				t.Fatalf("tokens %q blocks %d, want %q and blocks %v", out.Tokens, out.Blocks, tc.tokens, tc.blocks)
			}
		})
	}
}
