package frontend

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
)

// errTooLong marks a prompt over the token limit.
var errTooLong = errors.New("prompt too long")

// tokenArray reads a JSON array of token ids (integers in [0, 2^32)),
// appending to dst and refusing more than limit ids. It is the hot path of
// pre-tokenized requests (a long prompt is tens of thousands of ids), so it
// works on local copies of the cursor with an inlined digit loop; anything
// unusual (signs, fractions, exponents, leading zeros, overlong digits)
// falls back to the general number reader, which produces the exact error.
func (s *scanner) tokenArray(dst []uint32, limit int) ([]uint32, error) {
	if s.peek() != '[' {
		return nil, s.wrongType()
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	b := s.b
	i := skipSpace(b, s.i+1)
	if i < len(b) && b[i] == ']' {
		s.i = i + 1
		return dst, nil
	}
	// Sizing for ids of about four bytes with their comma avoids regrowing
	// a long prompt's slice a dozen times; the estimate is bounded by the
	// body and the limit.
	if want := min(limit, (len(b)-i)/4+1); cap(dst)-len(dst) < want {
		dst = append(make([]uint32, 0, len(dst)+want), dst...)
	}
	for {
		v, next, ok := plainToken(b, i)
		if !ok {
			s.i = i
			w, err := s.uint(math.MaxUint32)
			if err != nil {
				return nil, err
			}
			v, next = uint32(w), s.i
		}
		if len(dst) >= limit {
			return nil, errTooLong
		}
		dst = append(dst, v)
		i = skipSpace(b, next)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == ']':
			s.i = i + 1
			return dst, nil
		default:
			return nil, errSyntax
		}
	}
}

// plainToken parses the common form of a token id at b[i:]: one to ten
// digits without a leading zero, not followed by a fraction or exponent,
// at most 2^32-1. ok is false for anything else. Ids of up to seven digits
// (every vocabulary in use) are converted eight bytes at a time.
func plainToken(b []byte, i int) (v uint32, next int, ok bool) {
	var n int
	if i+8 <= len(b) {
		v, n = swarDigits(binary.LittleEndian.Uint64(b[i:]))
	}
	if n == 0 || n == 8 {
		return loopToken(b, i)
	}
	next = i + n
	if n > 1 && b[i] == '0' || next < len(b) && continuesNumber(b[next]) {
		return 0, 0, false
	}
	return v, next, true
}

// swarDigits converts the run of decimal digits at the start of the eight
// bytes x (little-endian, so the first character is the low byte) and
// returns its value and length. A length of 8 means the run may go on and
// the value is not computed; 0 means x starts with a non-digit.
func swarDigits(x uint64) (uint32, int) {
	d := x - 0x3030303030303030
	nonDigit := (d | (d + 0x7676767676767676)) & 0x8080808080808080
	n := bits.TrailingZeros64(nonDigit) / 8
	if n == 0 || n == 8 {
		return 0, n
	}
	// Keep the n digits, moved to the high bytes; the cleared low bytes
	// read as leading zeros. Then combine pairs, quads and octets.
	v := (d << (64 - 8*n)) & 0x0F0F0F0F0F0F0F0F
	v = (v * 2561) >> 8 & 0x00FF00FF00FF00FF
	v = (v * 6553601) >> 16 & 0x0000FFFF0000FFFF
	return uint32((v * 42949672960001) >> 32), n
}

// loopToken is plainToken one byte at a time, for the last bytes of the
// body and for ids of eight or more digits.
func loopToken(b []byte, i int) (v uint32, next int, ok bool) {
	start := i
	var acc uint64
	for i < len(b) && i-start <= 10 {
		c := b[i] - '0'
		if c > 9 {
			break
		}
		acc = acc*10 + uint64(c)
		i++
	}
	n := i - start
	if n == 0 || n > 10 || (n > 1 && b[start] == '0') || acc > math.MaxUint32 {
		return 0, 0, false
	}
	if i < len(b) && continuesNumber(b[i]) {
		return 0, 0, false
	}
	return uint32(acc), i, true
}

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// token reads one token id at the cursor (whitespace already skipped).
func (s *scanner) token() (uint32, error) {
	if v, next, ok := plainToken(s.b, s.i); ok {
		s.i = next
		return v, nil
	}
	w, err := s.uint(math.MaxUint32)
	return uint32(w), err
}

// continuesNumber reports whether c would extend a JSON number.
func continuesNumber(c byte) bool {
	return '0' <= c && c <= '9' || c == '.' || c == 'e' || c == 'E'
}

// countTokenArray validates a token id array without keeping it and
// returns its length; batch prompts after the first are checked this way.
func (s *scanner) countTokenArray(limit int) (int, error) {
	if s.peek() != '[' {
		return 0, s.wrongType()
	}
	s.i++
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	if s.consume(']') {
		return 0, nil
	}
	for n := 1; ; n++ {
		s.ws()
		if _, err := s.token(); err != nil {
			return 0, err
		}
		if n > limit {
			return 0, errTooLong
		}
		if s.consume(']') {
			return n, nil
		}
		if !s.consume(',') {
			return 0, errSyntax
		}
	}
}
