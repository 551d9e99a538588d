package tokenize

import (
	"encoding/json"
	"strings"
	"unsafe"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites a text segment before pre-tokenization. It returns s
// itself when there is nothing to change, which is the common case and
// costs no allocation.
type normalizer interface {
	normalize(s string) string
}

type unicodeForm struct{ f norm.Form }

func (u unicodeForm) normalize(s string) string {
	if u.f.IsNormalString(s) {
		return s
	}
	return u.f.String(s)
}

// normalizeInto is normalize writing into buf, for the encode path. The
// quick span settles plain ASCII and most text in one pass, and the part of
// s it vouches for is already in the form; only the rest goes through the
// iterator, which (unlike Form.String) allocates nothing. The result is s
// itself when the whole of it is in the form, else a string over buf's
// bytes, valid only until buf is reused: the caller must not keep it, nor
// any substring of it, past that (the word cache copies the words it keeps).
func (u unicodeForm) normalizeInto(s string, it *norm.Iter, buf []byte) (string, []byte) {
	n := u.f.QuickSpanString(s)
	if n == len(s) {
		return s, buf
	}
	buf = append(buf[:0], s[:n]...)
	it.InitString(u.f, s[n:])
	for !it.Done() {
		buf = append(buf, it.Next()...)
	}
	return unsafe.String(unsafe.SliceData(buf), len(buf)), buf
}

// normalizeScratch normalizes s for Encode, through the scratch's buffer
// when the normalizer can write into it (see unicodeForm.normalizeInto) and
// as normalize does otherwise.
func normalizeScratch(n normalizer, s string, sc *scratch) string {
	if u, ok := n.(unicodeForm); ok {
		s, sc.normBuf = u.normalizeInto(s, &sc.normIter, sc.normBuf)
		return s
	}
	return n.normalize(s)
}

type lowercase struct{}

func (lowercase) normalize(s string) string { return strings.ToLower(s) }

type prepend struct{ prefix string }

func (p prepend) normalize(s string) string {
	if s == "" {
		return s
	}
	return p.prefix + s
}

type replace struct{ old, new string }

func (r replace) normalize(s string) string { return strings.ReplaceAll(s, r.old, r.new) }

type normSequence []normalizer

func (q normSequence) normalize(s string) string {
	for _, n := range q {
		s = n.normalize(s)
	}
	return s
}

// normalizerJSON is the union of the normalizer objects this package reads.
type normalizerJSON struct {
	Type        string            `json:"type"`
	Normalizers []json.RawMessage `json:"normalizers"`
	Prepend     string            `json:"prepend"`
	Pattern     struct {
		String *string `json:"String"`
	} `json:"pattern"`
	Content string `json:"content"`
}

// parseNormalizer builds the normalizer at key; null means none.
func parseNormalizer(raw json.RawMessage, key string) (normalizer, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var n normalizerJSON
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, invalid(key, "%v", err)
	}
	switch n.Type {
	case "NFC":
		return unicodeForm{norm.NFC}, nil
	case "NFD":
		return unicodeForm{norm.NFD}, nil
	case "NFKC":
		return unicodeForm{norm.NFKC}, nil
	case "NFKD":
		return unicodeForm{norm.NFKD}, nil
	case "Lowercase":
		return lowercase{}, nil
	case "Prepend":
		return prepend{n.Prepend}, nil
	case "Replace":
		if n.Pattern.String == nil {
			return nil, unsupported(key+".pattern", "only string patterns are supported in Replace")
		}
		return replace{*n.Pattern.String, n.Content}, nil
	case "Sequence":
		var seq normSequence
		for i, r := range n.Normalizers {
			s, err := parseNormalizer(r, key+".normalizers["+itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			if s != nil {
				seq = append(seq, s)
			}
		}
		if len(seq) == 0 {
			return nil, nil
		}
		return seq, nil
	}
	return nil, unsupported(key+".type", "normalizer "+quote(n.Type))
}
