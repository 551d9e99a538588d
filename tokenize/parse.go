package tokenize

import (
	"encoding/json"
	"strconv"
	"strings"
)

// fileJSON is the part of tokenizer.json this package reads. Fields it
// does not know (truncation, padding, decoder) do not affect encoding.
type fileJSON struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	Model         modelJSON        `json:"model"`
	PostProcessor json.RawMessage  `json:"post_processor"`
}

type addedTokenJSON struct {
	ID         int64  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	Lstrip     bool   `json:"lstrip"`
	Rstrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string           `json:"type"`
	Dropout                 *float64         `json:"dropout"`
	UnkToken                *string          `json:"unk_token"`
	ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
	ByteFallback            bool             `json:"byte_fallback"`
	IgnoreMerges            bool             `json:"ignore_merges"`
	Vocab                   map[string]int64 `json:"vocab"`
	Merges                  json.RawMessage  `json:"merges"`
}

// maxID bounds token ids: ids are u32 on the wire, and a vocabulary this
// large is a corrupt file, not a model.
const maxID = 1 << 24

// parseAdded validates the added_tokens list.
func parseAdded(in []addedTokenJSON) ([]addedToken, error) {
	out := make([]addedToken, 0, len(in))
	for i, a := range in {
		if a.ID < 0 || a.ID >= maxID {
			return nil, invalid("added_tokens["+itoa(i)+"].id", "id %d out of range", a.ID)
		}
		out = append(out, addedToken{
			id: uint32(a.ID), content: a.Content, special: a.Special,
			lstrip: a.Lstrip, rstrip: a.Rstrip, singleWord: a.SingleWord, normalized: a.Normalized,
		})
	}
	return out, nil
}

// parseBPE builds the model from its JSON, refusing the BPE options that
// byte-level tokenizers do not use.
func parseBPE(m modelJSON) (*bpe, error) {
	switch {
	case m.Type != "BPE" && m.Type != "":
		return nil, unsupported("model.type", "model "+quote(m.Type)+"; only BPE is supported")
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, unsupported("model.dropout", "BPE dropout")
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, unsupported("model.continuing_subword_prefix", "subword prefixes")
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, unsupported("model.end_of_word_suffix", "end-of-word suffixes")
	case m.ByteFallback:
		return nil, unsupported("model.byte_fallback", "byte fallback")
	}
	b := &bpe{vocab: make(map[string]uint32, len(m.Vocab)), ignoreMerges: m.IgnoreMerges}
	byDisplay := make(map[string]uint32, len(m.Vocab))
	for tok, id := range m.Vocab {
		if id < 0 || id >= maxID {
			return nil, invalid("model.vocab", "token %q has id %d out of range", tok, id)
		}
		byDisplay[tok] = uint32(id)
		if raw, ok := fromByteLevel(tok); ok {
			b.vocab[raw] = uint32(id)
		}
	}
	for c := 0; c < 256; c++ {
		b.byteID[c], b.hasByte[c] = b.vocab[string([]byte{byte(c)})]
	}
	if m.UnkToken != nil {
		b.unk, b.isUnk = byDisplay[*m.UnkToken]
	}
	if err := b.parseMerges(m.Merges, byDisplay); err != nil {
		return nil, err
	}
	if !b.ignoreMerges {
		b.markWhole()
	}
	return b, nil
}

// parseMerges reads merges in either spelling: "a b" strings (older files)
// or ["a", "b"] pairs. A merge's rank is its position in the list.
func (b *bpe) parseMerges(raw json.RawMessage, byDisplay map[string]uint32) error {
	var pairs [][2]string
	var strs []string
	if err := json.Unmarshal(raw, &strs); err == nil {
		pairs = make([][2]string, len(strs))
		for i, s := range strs {
			a, c, ok := cutSpace(s)
			if !ok {
				return invalid("model.merges["+itoa(i)+"]", "merge %q is not two tokens", s)
			}
			pairs[i] = [2]string{a, c}
		}
	} else if err := json.Unmarshal(raw, &pairs); err != nil {
		return invalid("model.merges", "neither strings nor pairs of strings: %v", err)
	}
	b.merges = make(map[uint64]uint64, len(pairs))
	for i, p := range pairs {
		l, ok1 := byDisplay[p[0]]
		r, ok2 := byDisplay[p[1]]
		merged, ok3 := byDisplay[p[0]+p[1]]
		if !ok1 || !ok2 || !ok3 {
			return invalid("model.merges["+itoa(i)+"]", "merge %q + %q uses a token missing from the vocabulary", p[0], p[1])
		}
		k := pairKey(l, r)
		if _, dup := b.merges[k]; !dup {
			b.merges[k] = uint64(i)<<32 | uint64(merged)
		}
	}
	return nil
}

// markWhole finds the tokens that BPE rebuilds whole from their own bytes.
func (b *bpe) markWhole() {
	maxID := uint32(0)
	for _, id := range b.vocab {
		maxID = max(maxID, id)
	}
	b.whole = make([]bool, maxID+1)
	var sc scratch
	var out []uint32
	for w, id := range b.vocab {
		out = b.mergeWord(w, &sc, out[:0])
		b.whole[id] = len(out) == 1 && out[0] == id
	}
}

func cutSpace(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			return s[:i], s[i+1:], i > 0 && i+1 < len(s)
		}
	}
	return "", "", false
}

// byteLevelRune maps the ByteLevel alphabet back to bytes: printable
// Latin-1 bytes stand for themselves, and the other 68 bytes (controls,
// space, DEL, NBSP, soft hyphen...) were shifted to U+0100 and up, in
// byte order.
var byteLevelRune = func() map[rune]byte {
	m := make(map[rune]byte, 256)
	shifted := 0
	for c := 0; c < 256; c++ {
		if c >= '!' && c <= '~' || c >= 0xA1 && c <= 0xAC || c >= 0xAE && c <= 0xFF {
			m[rune(c)] = byte(c)
			continue
		}
		m[rune(256+shifted)] = byte(c)
		shifted++
	}
	return m
}()

// fromByteLevel decodes a vocabulary token from the ByteLevel alphabet; ok
// is false for a token spelled outside it, which byte-level BPE can never
// produce.
func fromByteLevel(tok string) (string, bool) {
	buf := make([]byte, 0, len(tok))
	for _, r := range tok {
		c, ok := byteLevelRune[r]
		if !ok {
			return "", false
		}
		buf = append(buf, c)
	}
	return string(buf), len(buf) > 0
}

// preTokJSON is the union of the pre-tokenizer objects this package reads.
type preTokJSON struct {
	Type           string            `json:"type"`
	PreTokenizers  []json.RawMessage `json:"pretokenizers"`
	Pattern        patternJSON       `json:"pattern"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	AddPrefixSpace bool              `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
	Individual     bool              `json:"individual_digits"`
}

type patternJSON struct {
	Regex  *string `json:"Regex"`
	String *string `json:"String"`
}

// parsePreTokenizer flattens the pre-tokenizer at key into steps, and
// reports whether one of them is ByteLevel.
func parsePreTokenizer(raw json.RawMessage, key string) (steps []splitter, byteLevelSeen bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false, nil
	}
	var p preTokJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, false, invalid(key, "%v", err)
	}
	switch p.Type {
	case "Sequence":
		for i, r := range p.PreTokenizers {
			s, bl, err := parsePreTokenizer(r, key+".pretokenizers["+itoa(i)+"]")
			if err != nil {
				return nil, false, err
			}
			steps, byteLevelSeen = append(steps, s...), byteLevelSeen || bl
		}
		return steps, byteLevelSeen, nil
	case "Split":
		s, err := parseSplit(p, key)
		return []splitter{s}, false, err
	case "ByteLevel":
		bl := byteLevel{addPrefixSpace: p.AddPrefixSpace}
		if p.UseRegex == nil || *p.UseRegex {
			bl.regex = patternSplit{match: knownPatterns[gpt2Pattern]}
		}
		return []splitter{bl}, true, nil
	}
	return nil, false, unsupported(key+".type", "pre-tokenizer "+quote(p.Type))
}

func parseSplit(p preTokJSON, key string) (splitter, error) {
	if p.Behavior != "Isolated" {
		return nil, unsupported(key+".behavior", "Split behaviour "+quote(p.Behavior)+"; only Isolated is supported")
	}
	if p.Invert {
		return nil, unsupported(key+".invert", "inverted Split")
	}
	pattern := ""
	switch {
	case p.Pattern.Regex != nil:
		pattern = *p.Pattern.Regex
	case p.Pattern.String != nil:
		pattern = regexpQuote(*p.Pattern.String)
	default:
		return nil, invalid(key+".pattern", "Split without a pattern")
	}
	s, err := newPatternSplitter(pattern)
	if err != nil {
		return nil, invalid(key+".pattern.Regex", "%v", err)
	}
	return s, nil
}

// regexpQuote escapes a literal for the regex engine.
func regexpQuote(s string) string {
	out := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`\.+*?()|[]{}^$#`, s[i]) >= 0 {
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func itoa(i int) string     { return strconv.Itoa(i) }
func quote(s string) string { return strconv.Quote(s) }
