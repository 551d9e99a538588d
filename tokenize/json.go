package tokenize

import (
	"encoding/json"
	"errors"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// jsonWalker turns JSON that json.Valid accepted into template values in
// one pass. Because the input is known to be valid, the walk only follows
// its structure; the leaves that need real decoding (strings with escapes
// or invalid UTF-8) are unescaped by its rules, so the values are exactly
// those the token decoder (jsonValueDecoder) produces (FuzzJSONValue
// holds the two together). The token decoder
// itself costs three passes and a copy per string, a fifth of a long chat
// prompt's whole encode.
type jsonWalker struct {
	data []byte
	pos  int
}

var errJSONDepth = errors.New("JSON nested too deeply")

func (w *jsonWalker) space() {
	for w.pos < len(w.data) {
		switch w.data[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.pos++
		default:
			return
		}
	}
}

// value reads the value at pos; depth is bounded as in decodeDepth.
func (w *jsonWalker) value(depth int) (jinja.Value, error) {
	if depth > maxJSONDepth {
		return jinja.Undefined(), errJSONDepth
	}
	w.space()
	switch w.data[w.pos] {
	case '[':
		return w.list(depth)
	case '{':
		return w.object(depth)
	case '"':
		s, err := w.str()
		return jinja.FromGoValue(s), err
	case 't':
		w.pos += len("true")
		return jinja.FromGoValue(true), nil
	case 'f':
		w.pos += len("false")
		return jinja.FromGoValue(false), nil
	case 'n':
		w.pos += len("null")
		return jinja.FromGoValue(nil), nil
	}
	return jinja.FromGoValue(w.number()), nil
}

func (w *jsonWalker) list(depth int) (jinja.Value, error) {
	var items []jinja.Value
	w.pos++ // [
	for {
		w.space()
		switch w.data[w.pos] {
		case ']':
			w.pos++
			return jinja.NewList(items), nil
		case ',':
			w.pos++
			continue
		}
		it, err := w.value(depth + 1)
		if err != nil {
			return jinja.Undefined(), err
		}
		items = append(items, it)
	}
}

func (w *jsonWalker) object(depth int) (jinja.Value, error) {
	obj := jinja.NewDict()
	w.pos++ // {
	for {
		w.space()
		switch w.data[w.pos] {
		case '}':
			w.pos++
			return obj, nil
		case ',':
			w.pos++
			continue
		}
		k, err := w.str()
		if err != nil {
			return jinja.Undefined(), err
		}
		w.space()
		w.pos++ // :
		v, err := w.value(depth + 1)
		if err != nil {
			return jinja.Undefined(), err
		}
		obj.AsDict().Set(k, v)
	}
}

// str reads the string at pos. One without escapes whose bytes are valid
// UTF-8 is its own text; any other is unescaped as encoding/json does
// (see unquote).
func (w *jsonWalker) str() (string, error) {
	start := w.pos
	plain := true
	i := start + 1
	for ; w.data[i] != '"'; i++ {
		if w.data[i] == '\\' {
			plain = false
			i++ // the escaped byte cannot end the string
		}
	}
	w.pos = i + 1
	raw := w.data[start+1 : i]
	if plain && utf8.Valid(raw) {
		return string(raw), nil
	}
	return unquote(raw), nil
}

// unquote decodes the body of a valid JSON string with the rules of
// encoding/json: a surrogate pair written as two \u escapes is one
// character, a lone surrogate and each byte of invalid UTF-8 are U+FFFD.
// The input being valid, every escape is complete.
func unquote(raw []byte) string {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			var n int
			out, n = unescape(out, raw[i:])
			i += n
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			out = utf8.AppendRune(out, r) // U+FFFD for an invalid byte
			i += n
		}
	}
	return string(out)
}

// unescape appends the character of the escape at the start of e and
// returns how many bytes of e it took.
func unescape(out, e []byte) ([]byte, int) {
	switch e[1] {
	case 'b':
		return append(out, '\b'), 2
	case 'f':
		return append(out, '\f'), 2
	case 'n':
		return append(out, '\n'), 2
	case 'r':
		return append(out, '\r'), 2
	case 't':
		return append(out, '\t'), 2
	case 'u':
	default: // '"', '\\', '/'
		return append(out, e[1]), 2
	}
	r := hex4(e[2:6])
	if utf16.IsSurrogate(r) {
		if len(e) >= 12 && e[6] == '\\' && e[7] == 'u' {
			if d := utf16.DecodeRune(r, hex4(e[8:12])); d != unicode.ReplacementChar {
				return utf8.AppendRune(out, d), 12
			}
		}
		r = unicode.ReplacementChar
	}
	return utf8.AppendRune(out, r), 6
}

// hex4 reads four hexadecimal digits.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// number reads the number at pos as json.Number, as the token decoder
// does with UseNumber.
func (w *jsonWalker) number() json.Number {
	start := w.pos
	for w.pos < len(w.data) {
		switch c := w.data[w.pos]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			w.pos++
		default:
			return json.Number(w.data[start:w.pos])
		}
	}
	return json.Number(w.data[start:w.pos])
}
