package server

import (
	"strings"
	"testing"
)

// TestPassThroughEndpoints checks that the mocker answers the
// pass-through endpoints in vLLM's shapes.
func TestPassThroughEndpoints(t *testing.T) {
	h := startHarness(t, nil, nil)
	tests := []struct {
		name, path, body, want string
	}{
		{"embeddings", "/v1/embeddings", `{"model":"` + testModel + `","input":"hello"}`, `"object":"embedding"`},
		{"embeddings of token ids", "/v1/embeddings", `{"input":[1,2,3]}`, `"prompt_tokens":3`},
		{"responses", "/v1/responses", `{"input":"hello","instructions":"be brief"}`, `"type":"output_text"`},
		{"tokenize a prompt", "/tokenize", `{"prompt":"abcdefgh"}`, `"tokens":[1684234849,1751606885]`},
		{"tokenize messages", "/tokenize", `{"messages":[{"role":"user","content":"hi"}]}`, `"count":`},
		{"detokenize", "/detokenize", `{"tokens":[1684234849,1751606885]}`, `"prompt":"abcdefgh"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := h.post(tc.path, tc.body, nil)
			if status != 200 || !strings.Contains(body, tc.want) {
				t.Fatalf("status %d body %s, want 200 with %s", status, body, tc.want)
			}
		})
	}
}
