package tokenize

import (
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// splitter is one pre-tokenization step: it cuts s into pieces and appends
// them to dst. Pieces are substrings of s, never copies, except where a
// step adds text (ByteLevel's prefix space).
type splitter interface {
	split(s string, dst []string) []string
}

// patternSplit is a Split pre-tokenizer with the Isolated behaviour: every
// match is a piece, and so is every stretch of text between matches.
type patternSplit struct {
	match anchored
}

func (p patternSplit) split(s string, dst []string) []string {
	last := 0
	for i := 0; i < len(s); {
		e := p.match(s, i)
		if e <= i {
			_, n := utf8.DecodeRuneInString(s[i:])
			i += n
			continue
		}
		if i > last {
			dst = append(dst, s[last:i])
		}
		dst = append(dst, s[i:e])
		i, last = e, e
	}
	if last < len(s) {
		dst = append(dst, s[last:])
	}
	return dst
}

// regexSplit is a Split pre-tokenizer (Isolated) whose pattern has no
// hand-written matcher. It runs on regexp2, a backtracking engine with the
// look-around these patterns use; its \s and \p{..} classes agree with
// Oniguruma's, which the reference tokenizers use.
type regexSplit struct {
	re *regexp2.Regexp
}

func newRegexSplit(pattern string) (regexSplit, error) {
	re, err := regexp2.Compile(pattern, regexp2.Unicode)
	if err != nil {
		return regexSplit{}, err
	}
	return regexSplit{re: re}, nil
}

// split matches on runes, as regexp2 does, and converts its rune offsets
// back to byte offsets as it goes.
func (p regexSplit) split(s string, dst []string) []string {
	m, err := p.re.FindStringMatch(s)
	last, bytePos, runePos := 0, 0, 0
	advance := func(to int) int {
		for runePos < to {
			_, n := utf8.DecodeRuneInString(s[bytePos:])
			bytePos += n
			runePos++
		}
		return bytePos
	}
	for err == nil && m != nil {
		start := advance(m.Index)
		end := advance(m.Index + m.Length)
		if end > start {
			if start > last {
				dst = append(dst, s[last:start])
			}
			dst = append(dst, s[start:end])
			last = end
		}
		m, err = p.re.FindNextMatch(m)
	}
	if last < len(s) {
		dst = append(dst, s[last:])
	}
	return dst
}

// byteLevel is the ByteLevel pre-tokenizer. The byte-to-character mapping
// it is named after needs no work here, because the vocabulary is stored
// as raw bytes (see bpe.go); what remains are its two options.
type byteLevel struct {
	addPrefixSpace bool
	regex          splitter // the GPT-2 split when use_regex is set, else nil
}

func (b byteLevel) split(s string, dst []string) []string {
	if b.addPrefixSpace && (s == "" || s[0] != ' ') {
		s = " " + s
	}
	if b.regex == nil {
		return append(dst, s)
	}
	return b.regex.split(s, dst)
}

// newPatternSplitter returns the hand-written matcher of a known pattern,
// else the general engine's.
func newPatternSplitter(pattern string) (splitter, error) {
	if m, ok := knownPatterns[pattern]; ok {
		return patternSplit{match: m}, nil
	}
	return newRegexSplit(pattern)
}
