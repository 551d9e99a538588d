package frontend

import (
	"encoding/json"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestPlainRunMatchesEncodingJSON checks the comma-mask fast path on long
// arrays whose elements are mostly plain ids with, now and then, anything
// the fast path must hand back to the general loop: spaces, leading
// zeros, signs, fractions, exponents, long and overflowing ids, empty
// elements. The parse must accept exactly what encoding/json accepts as a
// []uint32 and yield the same ids, also when it parses into a dirty
// recycled buffer.
func TestPlainRunMatchesEncodingJSON(t *testing.T) {
	forEachParser(t, testPlainRunMatchesEncodingJSON)
}

func testPlainRunMatchesEncodingJSON(t *testing.T) {
	buf := getTokens()
	rapid.Check(t, func(t *rapid.T) {
		plain := rapid.StringMatching(`[1-9][0-9]{0,6}|0`)
		odd := rapid.SampledFrom([]string{"5,,6", " 7", "7 ", "00", "012", "-1", "1.5", "2e3", "12345678", "4294967295",
			"4294967296", "99999999999", "\n3", "0", "1234567"})
		elems := rapid.SliceOfN(rapid.OneOf(plain, plain, plain, plain, plain, plain, odd), 30, 150).Draw(t, "elems")
		body := `{"model":"m","prompt":[` + strings.Join(elems, ",") + `]}`
		var want struct{ Prompt []uint32 }
		werr := json.Unmarshal([]byte(body), &want)
		p, err := parseRequestPooled([]byte(body), endpointCompletions, 1<<20, buf)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%s: err %v, encoding/json %v", body, err, werr)
		}
		if err == nil {
			if !equalTokens(p.Tokens, want.Prompt) {
				t.Fatalf("%s: tokens %v, encoding/json %v", body, p.Tokens, want.Prompt)
			}
			p.release()
		}
		buf = getTokens()
	})
}

// TestPlainRunStopsAtLimit checks that the fast path honours the token
// limit exactly: a prompt of limit ids passes, one more is refused.
func TestPlainRunStopsAtLimit(t *testing.T) {
	forEachParser(t, testPlainRunStopsAtLimit)
}

func testPlainRunStopsAtLimit(t *testing.T) {
	ids := make([]string, 200)
	for i := range ids {
		ids[i] = "123"
	}
	tests := []struct {
		name  string
		limit int
		ok    bool
	}{
		{name: "at the limit", limit: 200, ok: true},
		{name: "one over", limit: 199, ok: false},
		{name: "far over", limit: 10, ok: false},
	}
	body := []byte(`{"model":"m","prompt":[` + strings.Join(ids, ",") + `]}`)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parseRequestPooled(body, endpointCompletions, tc.limit, getTokens())
			if (err == nil) != tc.ok {
				t.Fatalf("limit %d: err %v", tc.limit, err)
			}
			if err == nil && len(p.Tokens) != 200 {
				t.Fatalf("%d tokens", len(p.Tokens))
			}
		})
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
			p, err := parseRequestPooled([]byte(tc.body), endpointCompletions, 100, getTokens())
			if err != nil || !equalTokens(p.Tokens, []uint32{1, 2, 3}) {
				t.Fatalf("tokens %v, err %v", p.Tokens, err)
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
