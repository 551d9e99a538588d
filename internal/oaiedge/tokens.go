package oaiedge

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
func (s *Scanner) tokenArray(dst []uint32, limit int) ([]uint32, error) {
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
		dst, i = plainRunFast(dst, b, i, limit)
		dst, i = plainRun(dst, b, i, limit)
		i = skipSpace(b, i)
		v, next, ok := plainToken(b, i)
		if !ok {
			s.i = i
			w, err := s.Uint(math.MaxUint32)
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

// plainRun appends the ids of the run of plain ids at b[i:] and returns
// the index after the run. A plain id here is what plainToken accepts, of
// at most seven digits, followed directly by a comma; that is how every
// serializer in use writes a token array, so almost all of a long prompt
// goes through this loop. It stops at anything else (the last id, spaces,
// long ids, leading zeros, the end of the body, the limit), leaving the
// cursor at the start of an id for the general loop, which then sees
// exactly the bytes it would have seen without the run.
//
// The commas of 64 bytes are located first, as a bit mask, so that where
// an id starts does not depend on parsing the id before it: the ids of a
// block are converted independently, which lets the processor overlap
// them instead of waiting on a chain of loads.
func plainRun(dst []uint32, b []byte, i, limit int) ([]uint32, int) {
	for i+64+8 <= len(b) {
		commas := commaMask(b[i : i+64])
		start := i
		for ; commas != 0; commas &= commas - 1 {
			// The id is b[start:end]; it is plain when its digit run,
			// counted from its own first eight bytes, ends at the comma.
			end := i + bits.TrailingZeros64(commas)
			n := end - start
			x := binary.LittleEndian.Uint64(b[start:])
			d := x - 0x3030303030303030
			digits := bits.TrailingZeros64((d|(d+0x7676767676767676))&0x8080808080808080) >> 3
			if digits != n || uint(n-1) > 6 || n > 1 && byte(x) == '0' || len(dst) >= limit {
				return dst, start
			}
			dst = append(dst, swarValue(d, n))
			start = end + 1
		}
		if start == i {
			return dst, i // an id of 64 bytes or more
		}
		i = start
	}
	return dst, i
}

// commaMask returns a mask with bit k set when block[k] is a comma.
func commaMask(block []byte) uint64 {
	var m uint64
	for k := range 8 {
		t := binary.LittleEndian.Uint64(block[8*k:]) ^ 0x2C2C2C2C2C2C2C2C
		// A byte's high bit ends up set exactly when the byte of t is zero;
		// no carry crosses bytes.
		z := ^(((t & 0x7F7F7F7F7F7F7F7F) + 0x7F7F7F7F7F7F7F7F) | t) & 0x8080808080808080
		m |= (z * 0x02040810204081 >> 56) << (8 * k)
	}
	return m
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
	return swarValue(d, n), n
}

// swarValue is the value of the n (1 to 7) digits at the start of d, the
// eight bytes less '0' each. It keeps the n digits, moved to the high
// bytes, so that the cleared low bytes read as leading zeros, then
// combines pairs, quads and octets.
func swarValue(d uint64, n int) uint32 {
	v := (d << (64 - 8*n)) & 0x0F0F0F0F0F0F0F0F
	v = (v * 2561) >> 8 & 0x00FF00FF00FF00FF
	v = (v * 6553601) >> 16 & 0x0000FFFF0000FFFF
	return uint32((v * 42949672960001) >> 32)
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
func (s *Scanner) token() (uint32, error) {
	if v, next, ok := plainToken(s.b, s.i); ok {
		s.i = next
		return v, nil
	}
	w, err := s.Uint(math.MaxUint32)
	return uint32(w), err
}

// isDigit reports whether c is a decimal digit.
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// continuesNumber reports whether c would extend a JSON number.
func continuesNumber(c byte) bool {
	return isDigit(c) || c == '.' || c == 'e' || c == 'E'
}

// countTokenArray validates a token id array without keeping it and
// returns its length; batch prompts after the first are checked this way.
func (s *Scanner) countTokenArray(limit int) (int, error) {
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
