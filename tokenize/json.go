package tokenize

import (
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// jsonWalker turns JSON that json.Valid accepted into template values in
// one pass. Because the input is known to be valid, the walk only follows
// its structure; the leaves that need real decoding (strings with escapes
// or invalid UTF-8) are handed to encoding/json, so the values are exactly
// those the token decoder (jsonValueDecoder) produces. The token decoder
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
// UTF-8 is its own text; any other is decoded by encoding/json, which
// resolves the escapes and reads invalid bytes as U+FFFD.
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
	var s string
	err := json.Unmarshal(w.data[start:w.pos], &s)
	return s, err
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
