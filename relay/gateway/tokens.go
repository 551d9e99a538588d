package gateway

import (
	"errors"
	"math"
)

// errNotTokens marks an array that is not all token ids.
var errNotTokens = errors.New("not an array of token ids")

// parseTokens reads a JSON array of token ids (integers in [0, 2^32))
// from raw, which the caller has already validated as JSON: so numbers
// are well formed and only their kind and range need checking. It is the
// hot path of pre-tokenized requests and does one pass with no
// allocation beyond the result; encoding/json costs several times more.
func parseTokens(raw []byte, limit int) ([]uint32, error) {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, errNotTokens
	}
	out := make([]uint32, 0, min(limit, len(raw)/2+1))
	i = skipWS(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return out, nil
	}
	for i < len(raw) {
		v, next, ok := token(raw, i)
		if !ok {
			return nil, errNotTokens
		}
		if len(out) == limit {
			return nil, ErrPromptTooLong
		}
		out = append(out, v)
		i = skipWS(raw, next)
		if i < len(raw) && raw[i] == ']' {
			return out, nil
		}
		if i >= len(raw) || raw[i] != ',' {
			return nil, errNotTokens
		}
		i = skipWS(raw, i+1)
	}
	return nil, errNotTokens
}

// token reads one non-negative integer below 2^32 at raw[i:].
func token(raw []byte, i int) (uint32, int, bool) {
	var v uint64
	start := i
	for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
		v = v*10 + uint64(raw[i]-'0')
		if v > math.MaxUint32 {
			return 0, i, false
		}
		i++
	}
	if i == start || i < len(raw) && (raw[i] == '.' || raw[i] == 'e' || raw[i] == 'E') {
		return 0, i, false
	}
	return uint32(v), i, true
}

// skipWS skips JSON whitespace from i.
func skipWS(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}
