package oaiedge

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// idsBody is a completions body of ids 1..n.
func idsBody(n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = strconv.Itoa(i + 1)
	}
	return `{"model":"m","prompt":[` + strings.Join(ids, ",") + `]}`
}

// TestParsePooledMatchesParse checks that recycled scratch buffers give
// the same requests as fresh parsing, including after a refusal wrote
// into a buffer.
func TestParsePooledMatchesParse(t *testing.T) {
	bodies := []string{idsBody(300), `{"model":"m","prompt":[1,2,"x"]}`, idsBody(20), `{"model":"m","prompt":"text"}`, idsBody(4096)}
	o := Options{MaxPromptTokens: 10_000}
	for round := range 3 {
		for i, b := range bodies {
			want, wantErr := Parse([]byte(b), Completions, o)
			got, err := ParsePooled([]byte(b), Completions, o)
			if (err == nil) != (wantErr == nil) || err == nil && (got.Model != want.Model || got.Text != want.Text || !slices.Equal(got.Tokens, want.Tokens)) {
				t.Fatalf("round %d body %d: pooled %+v, %v; fresh %+v, %v", round, i, got, err, want, wantErr)
			}
			got.Release()
			got.Release() // a second call does nothing
		}
	}
}

// TestPooledBufferNotSharedByTwoArrays checks that a body with both a
// prompt token array and the kvrouter.token_ids extension keeps both
// arrays intact, whichever comes first.
func TestPooledBufferNotSharedByTwoArrays(t *testing.T) {
	tests := []struct{ name, body string }{
		{name: "extension first", body: `{"model":"m","kvrouter":{"token_ids":[1,2,3]},"prompt":[7,8,9,10]}`},
		{name: "prompt first", body: `{"model":"m","prompt":[7,8,9,10],"kvrouter":{"token_ids":[1,2,3]}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParsePooled([]byte(tc.body), Completions, Options{MaxPromptTokens: 100})
			if err != nil || !slices.Equal(r.Tokens, []uint32{1, 2, 3}) {
				t.Fatalf("tokens %v, err %v", r.Tokens, err)
			}
			r.Release()
			if r.Tokens != nil || r.scratch != nil {
				t.Fatal("Release kept the buffer")
			}
		})
	}
}
