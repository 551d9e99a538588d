package oaiedge

import (
	"encoding/json"
	"slices"
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
	var buf []uint32
	rapid.Check(t, func(t *rapid.T) {
		plain := rapid.StringMatching(`[1-9][0-9]{0,6}|0`)
		odd := rapid.SampledFrom([]string{"5,,6", " 7", "7 ", "00", "012", "-1", "1.5", "2e3", "12345678", "4294967295",
			"4294967296", "99999999999", "\n3", "0", "1234567"})
		elems := rapid.SliceOfN(rapid.OneOf(plain, plain, plain, plain, plain, plain, odd), 30, 150).Draw(t, "elems")
		body := `{"model":"m","prompt":[` + strings.Join(elems, ",") + `]}`
		var want struct{ Prompt []uint32 }
		werr := json.Unmarshal([]byte(body), &want)
		p, err := completions([]byte(body), 1<<20, buf)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%s: err %v, encoding/json %v", body, err, werr)
		}
		if err == nil {
			if !slices.Equal(p.Tokens, want.Prompt) {
				t.Fatalf("%s: tokens %v, encoding/json %v", body, p.Tokens, want.Prompt)
			}
			buf = p.scratch
		}
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
			p, err := completions(body, tc.limit, nil)
			if (err == nil) != tc.ok {
				t.Fatalf("limit %d: err %v", tc.limit, err)
			}
			if err == nil && len(p.Tokens) != 200 {
				t.Fatalf("%d tokens", len(p.Tokens))
			}
		})
	}
}

// TestScratchNotSharedByTwoArrays checks that a body with both a prompt
// token array and the kvrouter.token_ids extension keeps both arrays
// intact, whichever comes first.
func TestScratchNotSharedByTwoArrays(t *testing.T) {
	tests := []struct{ name, body string }{
		{name: "extension first", body: `{"model":"m","kvrouter":{"token_ids":[1,2,3]},"prompt":[7,8,9,10]}`},
		{name: "prompt first", body: `{"model":"m","prompt":[7,8,9,10],"kvrouter":{"token_ids":[1,2,3]}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{MaxPromptTokens: 100}
			p, err := parseReusing([]byte(tc.body), Completions, o, make([]uint32, 0, 64))
			if err != nil || !slices.Equal(p.Tokens, []uint32{1, 2, 3}) {
				t.Fatalf("tokens %v, err %v", p.Tokens, err)
			}
		})
	}
}
