package oaiedge

import (
	"encoding/json"
	"errors"
	"math"
	"unicode/utf8"
)

// MaxJSONDepth is the nesting limit of the scanner. It equals
// encoding/json's limit, so that a router and an engine parsing the same
// bytes agree on which bodies are well formed.
const MaxJSONDepth = 10000

// Errors of the Scanner. Parse never returns them bare: it wraps them in an
// *Error naming the parameter.
var (
	// ErrMalformed marks malformed JSON (or nesting deeper than
	// MaxJSONDepth).
	ErrMalformed = errors.New("oaiedge: malformed JSON")
	// ErrType marks a well-formed value of the wrong JSON type.
	ErrType = errors.New("oaiedge: wrong JSON type")
)

// errSyntax and errType are the scanner's short names for the sentinels.
var (
	errSyntax = ErrMalformed
	errType   = ErrType
	// errUTF8 marks a prompt string (Scanner.text) holding bytes that are
	// not UTF-8: well-formed JSON to encoding/json, which would replace
	// them with U+FFFD, but not a prompt any engine tokenizes as sent.
	errUTF8 = errors.New("oaiedge: invalid UTF-8")
)

// Scanner is a validating, allocation-light JSON reader over a request
// body. It decodes only the values its caller asks for and skips (while
// validating) the rest, so the cost of a large body is one pass over its
// bytes. It accepts exactly what encoding/json accepts (the fuzz targets
// check this), including invalid UTF-8 inside strings. The zero Scanner
// reads an empty document; Seek points it at one.
type Scanner struct {
	b     []byte
	i     int
	depth int
}

// Seek points the scanner at b[at:], keeping its nesting depth, so that a
// caller holding its own cursor can hand the scanner a position and take
// it back with Pos.
func (s *Scanner) Seek(b []byte, at int) {
	s.b, s.i = b, at
}

// ws skips JSON whitespace.
func (s *Scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (s *Scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// consume skips c if it is the next non-space byte.
func (s *Scanner) consume(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// end checks that only whitespace remains.
func (s *Scanner) end() error {
	if s.peek() != 0 || s.i != len(s.b) {
		return errSyntax
	}
	return nil
}

// enter and leave track nesting against MaxJSONDepth.
func (s *Scanner) enter() error {
	s.depth++
	if s.depth > MaxJSONDepth {
		return errSyntax
	}
	return nil
}

func (s *Scanner) leave() { s.depth-- }

// Object iterates the members of the object at the cursor, calling f with
// each key (escapes decoded) positioned at its value; f must consume the
// value. A null value for the whole object is reported as errType by the
// caller, not here.
func (s *Scanner) Object(f func(key []byte) error) error {
	if !s.consume('{') {
		return errType
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	if s.consume('}') {
		return nil
	}
	for {
		key, err := s.key()
		if err != nil {
			return err
		}
		if !s.consume(':') {
			return errSyntax
		}
		if err := f(key); err != nil {
			return err
		}
		if s.consume('}') {
			return nil
		}
		if !s.consume(',') {
			return errSyntax
		}
	}
}

// Array iterates the elements of the array at the cursor, calling f with
// each element's index; f must consume the element.
func (s *Scanner) Array(f func(i int) error) error {
	if !s.consume('[') {
		return errType
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	if s.consume(']') {
		return nil
	}
	for n := 0; ; n++ {
		if err := f(n); err != nil {
			return err
		}
		if s.consume(']') {
			return nil
		}
		if !s.consume(',') {
			return errSyntax
		}
	}
}

// key reads an object key, decoding escapes only when there are any.
func (s *Scanner) key() ([]byte, error) {
	if s.peek() != '"' {
		return nil, errSyntax
	}
	raw, escaped, err := s.rawString()
	if err != nil || !escaped {
		return raw, err
	}
	str, err := unescape(raw)
	return []byte(str), err
}

// str reads a string value; errType if the value is another JSON type.
func (s *Scanner) str() (string, error) {
	b, err := s.strBytes()
	return string(b), err
}

// strBytes reads a string value as bytes, aliasing the body when the
// string has no escapes (the common case, which then costs no copy).
func (s *Scanner) strBytes() ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.wrongType()
	}
	raw, escaped, err := s.rawString()
	if err != nil || (!escaped && utf8.Valid(raw)) {
		return raw, err
	}
	str, err := unescape(raw)
	return []byte(str), err
}

// text reads a prompt string: strBytes, refusing bytes that are not
// UTF-8 (errUTF8). Escapes are ASCII, so the raw bytes are valid exactly
// when the string's own bytes are.
func (s *Scanner) text() ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.wrongType()
	}
	raw, escaped, err := s.rawString()
	switch {
	case err != nil:
		return nil, err
	case !utf8.Valid(raw):
		return nil, errUTF8
	case !escaped:
		return raw, nil
	}
	str, err := unescape(raw)
	return []byte(str), err
}

// rawString reads the string at the cursor and returns its bytes between
// the quotes (escapes intact) and whether it contains escapes.
func (s *Scanner) rawString() (raw []byte, escaped bool, err error) {
	s.i++ // opening quote
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], escaped, nil
		case c == '\\':
			escaped = true
			if err := s.escape(); err != nil {
				return nil, false, err
			}
		case c < 0x20:
			return nil, false, errSyntax
		default:
			s.i++
		}
	}
	return nil, false, errSyntax
}

// escape validates the escape sequence at the cursor (a backslash).
func (s *Scanner) escape() error {
	if s.i+1 >= len(s.b) {
		return errSyntax
	}
	switch s.b[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
		return nil
	case 'u':
		if s.i+6 > len(s.b) {
			return errSyntax
		}
		for _, h := range s.b[s.i+2 : s.i+6] {
			if !isHex(h) {
				return errSyntax
			}
		}
		s.i += 6
		return nil
	}
	return errSyntax
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// unescape decodes a validated string body with escapes or invalid UTF-8.
// It is the rare path, so it defers to encoding/json for exact surrogate
// handling and the same U+FFFD replacement an engine would apply.
func unescape(raw []byte) (string, error) {
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	var out string
	if err := json.Unmarshal(q, &out); err != nil {
		return "", errSyntax
	}
	return out, nil
}

// Null consumes a JSON null if one is next.
func (s *Scanner) Null() bool {
	if s.peek() == 'n' && s.literal("null") == nil {
		return true
	}
	return false
}

// literal consumes the exact literal word.
func (s *Scanner) literal(word string) error {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return errSyntax
	}
	s.i += len(word)
	return nil
}

// boolean reads true or false.
func (s *Scanner) boolean() (bool, error) {
	switch s.peek() {
	case 't':
		return true, s.literal("true")
	case 'f':
		return false, s.literal("false")
	}
	return false, s.wrongType()
}

// wrongType skips the (well-formed) value at the cursor and reports
// errType, or errSyntax if the value is malformed.
func (s *Scanner) wrongType() error {
	if err := s.Skip(); err != nil {
		return err
	}
	return errType
}

// number validates the JSON number at the cursor and reports whether it
// is a non-negative integer, with its value when that fits in a uint64.
func (s *Scanner) number() (v uint64, integer bool, err error) {
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	v, digits, overflow := s.digits()
	if digits == 0 || (digits > 1 && s.b[s.i-digits] == '0') {
		return 0, false, errSyntax
	}
	integer = !neg && !overflow
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if _, n, _ := s.digits(); n == 0 {
			return 0, false, errSyntax
		}
		integer = false
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if _, n, _ := s.digits(); n == 0 {
			return 0, false, errSyntax
		}
		integer = false
	}
	return v, integer, nil
}

// digits consumes a run of decimal digits and returns its value.
func (s *Scanner) digits() (v uint64, n int, overflow bool) {
	for s.i < len(s.b) {
		c := s.b[s.i] - '0'
		if c > 9 {
			break
		}
		if v > (math.MaxUint64-uint64(c))/10 {
			overflow = true
		}
		v = v*10 + uint64(c)
		s.i++
		n++
	}
	return v, n, overflow
}

// Uint reads a non-negative integer no larger than max.
func (s *Scanner) Uint(max uint64) (uint64, error) {
	c := s.peek()
	if c != '-' && (c < '0' || c > '9') {
		return 0, s.wrongType()
	}
	v, integer, err := s.number()
	if err != nil {
		return 0, err
	}
	if !integer || v > max {
		return 0, errType
	}
	return v, nil
}

// Raw consumes the value at the cursor, validating it, and returns its
// bytes, a slice of the document.
func (s *Scanner) Raw() ([]byte, error) {
	s.ws()
	start := s.i
	err := s.Skip()
	return s.b[start:s.i], err
}

// Skip validates and consumes any JSON value.
func (s *Scanner) Skip() error {
	switch c := s.peek(); {
	case c == '{':
		return s.Object(func([]byte) error { return s.Skip() })
	case c == '[':
		return s.Array(func(int) error { return s.Skip() })
	case c == '"':
		_, _, err := s.rawString()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		_, _, err := s.number()
		return err
	}
	return errSyntax
}
