package tokenize

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// class is a bit set of the Unicode properties the pre-tokenizer patterns
// test: general categories and White_Space. Patterns in tokenizer.json are
// Oniguruma regexes, whose \s is the White_Space property and whose \p{..}
// are general categories.
type class uint16

const (
	clLu    class = 1 << iota // uppercase letter
	clLl                      // lowercase letter
	clLt                      // titlecase letter
	clLm                      // modifier letter
	clLo                      // other letter
	clM                       // mark (Mn, Mc, Me)
	clN                       // number (Nd, Nl, No)
	clP                       // punctuation
	clS                       // symbol
	clSpace                   // White_Space (\s)
	clNL                      // '\r' or '\n'

	clL = clLu | clLl | clLt | clLm | clLo
)

// bmpClasses caches the class of every code point of the Basic Multilingual
// Plane: a table lookup instead of a dozen range-table searches per
// character on the encode path. It is built once, on first use.
var (
	bmpOnce    sync.Once
	bmpClasses []class
)

func buildBMP() {
	t := make([]class, 0x10000)
	for r := range t {
		t[r] = computeClass(rune(r))
	}
	bmpClasses = t
}

// classOf returns the class of r.
func classOf(r rune) class {
	if r < 0x10000 {
		bmpOnce.Do(buildBMP)
		return bmpClasses[r]
	}
	return computeClass(r)
}

// computeClass classifies r from the unicode package's tables.
func computeClass(r rune) class {
	var c class
	switch {
	case unicode.Is(unicode.Lu, r):
		c |= clLu
	case unicode.Is(unicode.Ll, r):
		c |= clLl
	case unicode.Is(unicode.Lt, r):
		c |= clLt
	case unicode.Is(unicode.Lm, r):
		c |= clLm
	case unicode.Is(unicode.Lo, r):
		c |= clLo
	case unicode.Is(unicode.M, r):
		c |= clM
	case unicode.Is(unicode.N, r):
		c |= clN
	case unicode.Is(unicode.P, r):
		c |= clP
	case unicode.Is(unicode.S, r):
		c |= clS
	}
	if unicode.Is(unicode.White_Space, r) {
		c |= clSpace
	}
	if r == '\r' || r == '\n' {
		c |= clNL
	}
	return c
}

// at decodes the code point starting at s[i] and returns its class and
// width. The text is valid UTF-8 by the time patterns run (Encode repairs it
// first), so a width of one always belongs to ASCII.
func at(s string, i int) (class, int) {
	if b := s[i]; b < utf8.RuneSelf {
		bmpOnce.Do(buildBMP)
		return bmpClasses[b], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return classOf(r), n
}

// run returns the end of the longest run of characters from s[i] whose
// classes intersect want.
func run(s string, i int, want class) int {
	for i < len(s) {
		c, n := at(s, i)
		if c&want == 0 {
			break
		}
		i += n
	}
	return i
}
