package tokenize

import (
	"strings"
	"testing"
)

// patternSeeds are texts that exercise the alternatives of the patterns.
var patternSeeds = []string{
	"Hello  world's <|im_start|> 12345 éé\n\n  x",
	"I'M here, we'Ll see; DON'T\t\ttabs\r\n\r\n  ",
	"CamelCaseWORDSAreHere ABCdef ǅungla ˈaˈb",
	"你好世界 ひらがな カタカナ 한국어 ١٢٣ ⅫⅦ",
	"e\u0301 \u0301a x\u0301\u0301 $$$abc !!abc 3abc _x",
	"    \n   \n\t \u00a0 \u3000x  ",
	"👩‍💻🇫🇷 a/b//c\n/ ...\n",
}

// FuzzPatterns checks each hand-written matcher against the general regex
// engine running the same pattern.
func FuzzPatterns(f *testing.F) {
	for _, s := range patternSeeds {
		f.Add(s)
	}
	type pair struct {
		name       string
		hand, slow splitter
	}
	var pairs []pair
	for pat, m := range knownPatterns {
		slow, err := newRegexSplit(pat)
		if err != nil {
			f.Fatalf("pattern %q: %v", pat, err)
		}
		pairs = append(pairs, pair{pat, patternSplit{match: m}, slow})
	}
	f.Fuzz(func(t *testing.T, s string) {
		// The general engine folds case by lower-casing, which misses
		// U+017F (ſ); Unicode case folding, and so the reference, does not.
		s = strings.ToValidUTF8(strings.ReplaceAll(s, "\u017f", ""), "")
		for _, p := range pairs {
			a := p.hand.split(s, nil)
			b := p.slow.split(s, nil)
			if strings.Join(a, "|") != strings.Join(b, "|") || len(a) != len(b) {
				t.Fatalf("pattern %q on %q:\nhand  %q\nregex %q", p.name, s, a, b)
			}
		}
	})
}

// FuzzParse feeds arbitrary bytes to the tokenizer.json parser: an error
// is fine, a panic is not.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"pre_tokenizer":{"type":"ByteLevel"},"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}}`))
	f.Add([]byte(`{"normalizer":{"type":"Sequence","normalizers":[{"type":"NFC"}]},"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\p{N}{1,3}"},"behavior":"Isolated"},{"type":"ByteLevel","use_regex":false}]},"model":{"type":"BPE","vocab":{"a":0},"merges":[["a","a"]]},"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"a"}},{"Sequence":{"id":"A"}}],"special_tokens":{"a":{"ids":[0]}}}}`))
	f.Add([]byte(`{"added_tokens":[{"id":1,"content":"<s>","special":true,"lstrip":true}],"pre_tokenizer":{"type":"ByteLevel"},"model":{"vocab":{},"merges":[]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := New(data, nil)
		if err == nil {
			tok.Encode("a b <s> ab\n", true, nil)
		}
	})
}

// FuzzEncode encodes arbitrary text with a real tokenizer of each
// pattern family: no panic, and the same ids twice (the word cache must
// not change results).
func FuzzEncode(f *testing.F) {
	for _, s := range patternSeeds {
		f.Add(s)
	}
	toks := []*Tokenizer{loadFamily(f, "qwen3"), loadFamily(f, "deepseek_v3"), loadFamily(f, "gptoss")}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range toks {
			a := tok.Encode(s, true, nil)
			b := tok.Encode(s, true, nil)
			if !equalIDs(a, b) {
				t.Fatalf("%q encodes differently the second time", s)
			}
		}
	})
}

// jsonSeeds exercise the JSON walker: escapes, invalid UTF-8, numbers of
// both kinds, nesting, key order, empty containers, and invalid input.
var jsonSeeds = []string{
	`[{"role":"user","content":"héllo \"quoted\" \\ \/ \u00e9 \ud83d\ude00 \n"}]`,
	"[\"bad \xff utf8\", \"ok\"]",
	`["\ud800\u0041", "\udc00", "\ud83d\ud83d\ude00", "\uD83D\uDE00\b\f\r\t"]`,
	`{"b":1,"a":-2.5e+3,"c":[true,false,null,[],{}],"b":3}`,
	` [ 1 , 2.0 , -0 , 1E2 ] `,
	`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["deep"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	`[1,]`,
	`{"a":1} x`,
	``,
}

// FuzzJSONValue checks the JSON walker against the token decoder it
// replaces on valid input: the same values, in the same order, or the
// same failure.
func FuzzJSONValue(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gotErr := jsonValue(data)
		want, wantErr := jsonValueDecoder(data)
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("%q: error %v, decoder's %v", data, gotErr, wantErr)
		}
		if gotErr == nil && (got.String() != want.String() || !got.Equals(want)) {
			t.Fatalf("%q: %s, decoder's %s", data, got, want)
		}
	})
}
