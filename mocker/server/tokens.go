package server

import (
	"bytes"
	"fmt"
	"math"
)

// tokenList is a JSON array of token ids. It decodes itself with a direct
// scan instead of encoding/json's reflective path, which costs several
// times more for the 100k-token prompts the simulator replays; every id is
// checked to be an integer that fits a u32.
type tokenList []uint32

// UnmarshalJSON reads an array of non-negative integers (null reads as
// empty).
func (l *tokenList) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, []byte("null")) {
		*l = nil
		return nil
	}
	if len(data) < 2 || data[0] != '[' || data[len(data)-1] != ']' {
		return fmt.Errorf("%w: token ids must be an array", ErrRequest)
	}
	out := make([]uint32, 0, len(data)/4)
	body := bytes.TrimSpace(data[1 : len(data)-1])
	for len(body) > 0 {
		var item []byte
		item, body, _ = bytes.Cut(body, []byte{','})
		v, err := parseTokenID(bytes.TrimSpace(item))
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	*l = out
	return nil
}

// parseTokenID parses one decimal id in 0..MaxUint32.
func parseTokenID(b []byte) (uint32, error) {
	if len(b) == 0 || len(b) > 10 {
		return 0, fmt.Errorf("%w: token id %q is not a u32", ErrRequest, b)
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: token id %q is not a u32", ErrRequest, b)
		}
		v = v*10 + uint64(c-'0')
	}
	if v > math.MaxUint32 {
		return 0, fmt.Errorf("%w: token id %s out of range", ErrRequest, b)
	}
	return uint32(v), nil
}
