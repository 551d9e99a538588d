package tokenize

import (
	"strings"
	"unicode/utf8"
)

// anchored reports the end of a pattern's match that starts exactly at s[i],
// or -1 when no alternative matches there. Each implementation below is one
// of the Split regexes that byte-level BPE tokenizers ship, written out as
// the backtracking matcher would run it (alternatives in order, greedy
// quantifiers giving back one character at a time), because Go's regexp has
// no look-ahead and a general backtracking engine costs several times more
// per character than these loops.
type anchored func(s string, i int) int

// knownPatterns maps a Split regex, exactly as tokenizer.json spells it, to
// its hand-written matcher. A pattern not listed here runs on the general
// regex engine instead (see regex.go).
var knownPatterns = map[string]anchored{
	// Llama 3 (and the cl100k family).
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: func(s string, i int) int {
		return cl100k(s, i, 3)
	},
	// Qwen 2.5 and Qwen 3: as Llama 3 but one digit per piece.
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: func(s string, i int) int {
		return cl100k(s, i, 1)
	},
	// GPT-OSS (o200k).
	`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`: o200k,
	// DeepSeek V3: three Splits in sequence.
	`\p{N}{1,3}`: func(s string, i int) int {
		return numbers(s, i, 3)
	},
	`[一-龥぀-ゟ゠-ヿ]+`: cjkRun,
	"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+": deepseek,
}

// gpt2Pattern is the split the ByteLevel pre-tokenizer applies itself when
// its use_regex option is set (GPT-2, RoBERTa and their descendants).
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

func init() { knownPatterns[gpt2Pattern] = gpt2 }

// cl100k matches the Llama 3 / Qwen pattern; maxDigits is the bound of its
// \p{N} repetition.
func cl100k(s string, i, maxDigits int) int {
	if e := contraction(s, i, true); e >= 0 {
		return e
	}
	c, n := at(s, i)
	switch {
	case c&clL != 0:
		return run(s, i, clL)
	case c&(clNL|clN) == 0 && i+n < len(s):
		if c2, _ := at(s, i+n); c2&clL != 0 {
			return run(s, i+n, clL)
		}
	}
	if c&clN != 0 {
		return numbers(s, i, maxDigits)
	}
	if e := punctuation(s, i, clSpace|clL|clN, "\r\n"); e >= 0 {
		return e
	}
	return whitespace(s, i)
}

// gpt2 matches gpt2Pattern.
func gpt2(s string, i int) int {
	if e := contraction(s, i, false); e >= 0 {
		return e
	}
	j := i
	if s[i] == ' ' && i+1 < len(s) {
		j = i + 1
	}
	if c, _ := at(s, j); c&clL != 0 {
		return run(s, j, clL)
	} else if c&clN != 0 {
		return run(s, j, clN)
	}
	if e := punctuation(s, i, clSpace|clL|clN, ""); e >= 0 {
		return e
	}
	return spaceRun(s, i, false)
}

// o200k matches the GPT-OSS pattern, whose first two alternatives split
// words at case changes: an upper-case run may only be followed by a lower-
// case run, and letters of the classes both runs accept (Lm, Lo, marks) are
// given back one at a time when the lower-case run would otherwise be empty.
func o200k(s string, i int) int {
	const upper = clLu | clLt | clLm | clLo | clM
	const lower = clLl | clLm | clLo | clM
	c, n := at(s, i)
	starts := [2]int{i, -1}
	if c&(clNL|clL|clN) == 0 && i+n < len(s) {
		starts = [2]int{i + n, i}
	}
	for _, p := range starts {
		if p >= 0 {
			if e := upperLower(s, p, upper, lower); e >= 0 {
				return contractionOpt(s, e)
			}
		}
	}
	for _, p := range starts {
		if p >= 0 {
			if e := run(s, p, upper); e > p {
				return contractionOpt(s, run(s, e, lower))
			}
		}
	}
	if c&clN != 0 {
		return numbers(s, i, 3)
	}
	if e := punctuation(s, i, clSpace|clL|clN, "\r\n/"); e >= 0 {
		return e
	}
	return whitespace(s, i)
}

// upperLower matches [upper]*[lower]+ at p, or returns -1.
func upperLower(s string, p int, upper, lower class) int {
	end := run(s, p, upper)
	if end < len(s) {
		if c, _ := at(s, end); c&lower != 0 {
			return run(s, end, lower)
		}
	}
	// Give back upper-class characters until one of them is also lower.
	for k := end; k > p; {
		r, w := utf8.DecodeLastRuneInString(s[p:k])
		if classOf(r)&lower != 0 {
			return k
		}
		k -= w
	}
	return -1
}

// deepseek matches DeepSeek V3's third Split pattern.
func deepseek(s string, i int) int {
	if isASCIIPunct(s[i]) && i+1 < len(s) && isASCIILetter(s[i+1]) {
		j := i + 1
		for j < len(s) && isASCIILetter(s[j]) {
			j++
		}
		return j
	}
	c, n := at(s, i)
	if c&(clNL|clL|clP|clS) == 0 && i+n < len(s) {
		if e := run(s, i+n, clL|clM); e > i+n {
			return e
		}
	}
	if e := run(s, i, clL|clM); e > i {
		return e
	}
	j := i
	if s[i] == ' ' {
		j = i + 1
	}
	if e := run(s, j, clP|clS); e > j {
		return trail(s, e, "\r\n")
	}
	return whitespace(s, i)
}

// cjkRun matches [一-龥぀-ゟ゠-ヿ]+: CJK ideographs U+4E00–U+9FA5, hiragana
// U+3040–U+309F and katakana U+30A0–U+30FF.
func cjkRun(s string, i int) int {
	j := i
	for j < len(s) {
		r, w := utf8.DecodeRuneInString(s[j:])
		if !(r >= 0x4E00 && r <= 0x9FA5 || r >= 0x3040 && r <= 0x30FF) {
			break
		}
		j += w
	}
	if j == i {
		return -1
	}
	return j
}

// numbers matches \p{N}{1,max} at i.
func numbers(s string, i, max int) int {
	j := i
	for k := 0; k < max && j < len(s); k++ {
		c, n := at(s, j)
		if c&clN == 0 {
			break
		}
		j += n
	}
	if j == i {
		return -1
	}
	return j
}

// punctuation matches " ?[^<not>]+[<tail>]*" at i, or returns -1.
func punctuation(s string, i int, not class, tail string) int {
	j := i
	if s[i] == ' ' {
		j = i + 1
	}
	k := j
	for k < len(s) {
		c, n := at(s, k)
		if c&not != 0 {
			break
		}
		k += n
	}
	if k == j {
		return -1
	}
	return trail(s, k, tail)
}

// trail extends a match over any run of the ASCII characters in tail.
func trail(s string, i int, tail string) int {
	for i < len(s) && tail != "" && strings.IndexByte(tail, s[i]) >= 0 {
		i++
	}
	return i
}

// whitespace matches \s*[\r\n]+|\s+(?!\S)|\s+ at i: up to the last line
// break of a whitespace run; else the whole run at the end of the text; else
// all of the run but its last character, which then leads the next piece;
// else one whitespace character.
func whitespace(s string, i int) int { return spaceRun(s, i, true) }

// spaceRun is whitespace, without its first alternative (the line breaks)
// unless lines is set.
func spaceRun(s string, i int, lines bool) int {
	end, lastNL := i, -1
	for end < len(s) {
		c, n := at(s, end)
		if c&clSpace == 0 {
			break
		}
		if lines && c&clNL != 0 {
			lastNL = end + n
		}
		end += n
	}
	switch {
	case end == i:
		return -1
	case lastNL >= 0:
		return lastNL
	case end == len(s):
		return end
	}
	_, w := utf8.DecodeLastRuneInString(s[i:end])
	if end-w > i {
		return end - w
	}
	return end
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d at i, case-insensitively when
// fold is set, or returns -1.
func contraction(s string, i int, fold bool) int {
	if s[i] != '\'' || i+1 >= len(s) {
		return -1
	}
	for _, suf := range [...]string{"s", "t", "re", "ve", "m", "ll", "d"} {
		if e := matchSuffix(s, i+1, suf, fold); e >= 0 {
			return e
		}
	}
	return -1
}

// contractionOpt applies the optional case-insensitive contraction that
// ends o200k's word alternatives.
func contractionOpt(s string, i int) int {
	if i < len(s) {
		if e := contraction(s, i, true); e >= 0 {
			return e
		}
	}
	return i
}

// matchSuffix matches the ASCII letters of suf at s[i:], folding case when
// fold is set; under Unicode case folding 's' also matches U+017F (ſ).
func matchSuffix(s string, i int, suf string, fold bool) int {
	for k := 0; k < len(suf); k++ {
		if i >= len(s) {
			return -1
		}
		b := s[i]
		switch {
		case b == suf[k]:
			i++
		case fold && b|0x20 == suf[k] && b >= 'A' && b <= 'Z':
			i++
		case fold && suf[k] == 's' && len(s) >= i+2 && s[i:i+2] == "\u017f":
			i += 2
		default:
			return -1
		}
	}
	return i
}

func isASCIILetter(b byte) bool { return b|0x20 >= 'a' && b|0x20 <= 'z' }

// isASCIIPunct reports whether b is one of !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~.
func isASCIIPunct(b byte) bool {
	return b >= '!' && b <= '/' || b >= ':' && b <= '@' || b >= '[' && b <= '`' || b >= '{' && b <= '~'
}
