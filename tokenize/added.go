package tokenize

import (
	"unicode"
	"unicode/utf8"
)

// addedToken is an entry of tokenizer.json's added_tokens: text that is cut
// out of the input before any other step and encoded as one id.
type addedToken struct {
	id         uint32
	content    string
	special    bool
	lstrip     bool // the match swallows whitespace on its left
	rstrip     bool // and on its right
	singleWord bool // only matches when not inside a word
	normalized bool // matched in the normalized text rather than the raw one
}

// addedMatcher finds added tokens in text, leftmost first and longest
// among those starting at one position, as the reference does. It is a
// byte trie whose nodes keep their children sorted in small slices: the
// vocabularies it holds are a few hundred tokens sharing long prefixes.
type addedMatcher struct {
	nodes []trieNode
	first [256]bool // bytes that start some token, to skip text quickly
}

type trieNode struct {
	keys  []byte
	kids  []int32
	token int32 // index into the token list, or -1
}

func newAddedMatcher(tokens []addedToken, pick func(addedToken) bool) *addedMatcher {
	m := &addedMatcher{nodes: []trieNode{{token: -1}}}
	for i, t := range tokens {
		if t.content == "" || !pick(t) {
			continue
		}
		n := 0
		for k := 0; k < len(t.content); k++ {
			n = m.child(n, t.content[k])
		}
		if m.nodes[n].token < 0 {
			m.nodes[n].token = int32(i)
		}
		m.first[t.content[0]] = true
	}
	if len(m.nodes) == 1 {
		return nil
	}
	return m
}

// child returns node n's child for byte b, adding it if absent.
func (m *addedMatcher) child(n int, b byte) int {
	for i, k := range m.nodes[n].keys {
		if k == b {
			return int(m.nodes[n].kids[i])
		}
	}
	m.nodes = append(m.nodes, trieNode{token: -1})
	c := len(m.nodes) - 1
	m.nodes[n].keys = append(m.nodes[n].keys, b)
	m.nodes[n].kids = append(m.nodes[n].kids, int32(c))
	return c
}

// longest returns the token of the longest match starting at s[i] and its
// end, or -1.
func (m *addedMatcher) longest(s string, i int) (tok int32, end int) {
	tok, n := -1, 0
	for j := i; j < len(s); j++ {
		next := -1
		node := &m.nodes[n]
		for k, b := range node.keys {
			if b == s[j] {
				next = int(node.kids[k])
				break
			}
		}
		if next < 0 {
			break
		}
		n = next
		if t := m.nodes[n].token; t >= 0 {
			tok, end = t, j+1
		}
	}
	return tok, end
}

// segment is a stretch of input: either text to encode, or one added token.
type segment struct {
	text  string
	token int32 // index into the added tokens, or -1 for text
}

// split cuts s into text and added-token segments, appending them to dst.
// The matches follow the reference's rules: single_word tokens inside a
// word are not matches, lstrip and rstrip widen a match over neighbouring
// whitespace, and a match that starts inside the previous one is dropped.
func (m *addedMatcher) split(s string, tokens []addedToken, dst []segment) []segment {
	last := 0
	for i := 0; i < len(s); i++ {
		if !m.first[s[i]] {
			continue
		}
		t, end := m.longest(s, i)
		if t < 0 {
			continue
		}
		tk := &tokens[t]
		if tk.singleWord && !(wordBoundaryBefore(s[:i]) && wordBoundaryAfter(s[end:])) {
			continue
		}
		start := i
		if tk.lstrip {
			start = max(last, trimLeftSpace(s, i))
		}
		if tk.rstrip {
			end = trimRightSpace(s, end)
		}
		if start > last {
			dst = append(dst, segment{text: s[last:start], token: -1})
		}
		dst = append(dst, segment{text: s[start:end], token: t})
		last = end
		i = end - 1
	}
	if last < len(s) {
		dst = append(dst, segment{text: s[last:], token: -1})
	}
	return dst
}

// trimLeftSpace returns the start of the whitespace run ending at s[i].
func trimLeftSpace(s string, i int) int {
	for i > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.IsSpace(r) {
			break
		}
		i -= n
	}
	return i
}

// trimRightSpace returns the end of the whitespace run starting at s[i].
func trimRightSpace(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += n
	}
	return i
}

// isWordChar is the reference's word character: alphanumeric or '_'.
func isWordChar(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) }

func wordBoundaryBefore(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n == 0 || !isWordChar(r)
}

func wordBoundaryAfter(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n == 0 || !isWordChar(r)
}
