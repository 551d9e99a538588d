package server

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"
)

// FuzzTokenList checks the direct scanner against encoding/json on valid
// JSON: both accept the same arrays of u32 and read the same ids.
func FuzzTokenList(f *testing.F) {
	for _, s := range []string{`[]`, `[1,2,3]`, `[ 4294967295 ]`, `[4294967296]`, `[-1]`, `[1.5]`, `[1e3]`, `null`, `[01]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		var got tokenList
		err := json.Unmarshal([]byte(s), &got)
		var ref []int64
		refErr := json.Unmarshal([]byte(s), &ref)
		refOK := refErr == nil && !slices.ContainsFunc(ref, func(v int64) bool { return v < 0 || v > math.MaxUint32 })
		if err != nil {
			if !errors.Is(err, ErrRequest) {
				t.Fatalf("%q: error %v does not wrap ErrRequest", s, err)
			}
			if refOK && !slices.ContainsFunc([]byte(s), func(c byte) bool { return c == 'e' || c == 'E' || c == '.' }) {
				t.Fatalf("%q: rejected (%v) but encoding/json reads %v", s, err, ref)
			}
			return
		}
		if !refOK || len(got) != len(ref) {
			t.Fatalf("%q: read %v, encoding/json %v (%v)", s, got, ref, refErr)
		}
		for i := range got {
			if int64(got[i]) != ref[i] {
				t.Fatalf("%q: id %d is %d, want %d", s, i, got[i], ref[i])
			}
		}
	})
}

// FuzzParse checks that no request body panics the parsers and that every
// refusal wraps ErrRequest.
func FuzzParse(f *testing.F) {
	f.Add(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`)
	f.Add(`{"prompt":[[1,2]],"kvrouter":{"token_ids":[5]}}`)
	f.Add(`{"prompt":["x"],"n":1}`)
	f.Fuzz(func(t *testing.T, body string) {
		for _, parse := range []parser{parseChat, parseCompletion} {
			g, err := parse([]byte(body), limits{def: 4, max: 8})
			if err != nil && !errors.Is(err, ErrRequest) {
				t.Fatalf("%q: %v", body, err)
			}
			if err == nil && (g.maxTokens < 1 || g.maxTokens > 8) {
				t.Fatalf("%q: max tokens %d", body, g.maxTokens)
			}
		}
	})
}
