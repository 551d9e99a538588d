package tokenize

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// TestLoadErrors checks that files that do not parse, or describe a
// tokenizer outside the supported family, fail with a typed error naming
// the file and the key.
func TestLoadErrors(t *testing.T) {
	bl := `{"type":"ByteLevel","add_prefix_space":false,"use_regex":true}`
	model := `{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}`
	tests := []struct {
		name    string
		file    string
		wantErr error
		wantKey string
	}{
		{"not json", `{"model":`, ErrInvalid, ""},
		{"wordpiece", `{"pre_tokenizer":` + bl + `,"model":{"type":"WordPiece","vocab":{}}}`, ErrUnsupported, "model.type"},
		{"metaspace", `{"pre_tokenizer":{"type":"Metaspace"},"model":` + model + `}`, ErrUnsupported, "pre_tokenizer.type"},
		{"no byte level", `{"model":` + model + `}`, ErrUnsupported, "pre_tokenizer"},
		{"unknown normalizer", `{"normalizer":{"type":"Precompiled"},"pre_tokenizer":` + bl + `,"model":` + model + `}`, ErrUnsupported, "normalizer.type"},
		{"merge outside vocab", `{"pre_tokenizer":` + bl + `,"model":{"type":"BPE","vocab":{"a":0},"merges":["a c"]}}`, ErrInvalid, "model.merges[0]"},
		{"bad merges", `{"pre_tokenizer":` + bl + `,"model":{"type":"BPE","vocab":{"a":0},"merges":3}}`, ErrInvalid, "model.merges"},
		{"bad split regex", `{"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(("},"behavior":"Isolated"},` + bl + `]},"model":` + model + `}`, ErrInvalid, "pre_tokenizer.pretokenizers[0].pattern.Regex"},
		{"negative id", `{"added_tokens":[{"id":-1,"content":"x"}],"pre_tokenizer":` + bl + `,"model":` + model + `}`, ErrInvalid, "added_tokens[0].id"},
		{"unknown post-processor", `{"pre_tokenizer":` + bl + `,"model":` + model + `,"post_processor":{"type":"Whatever"}}`, ErrUnsupported, "post_processor.type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, TokenizerFile), []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(dir)
			var fe *FileError
			if !errors.Is(err, tt.wantErr) || !errors.As(err, &fe) {
				t.Fatalf("got %v, want %v in a *FileError", err, tt.wantErr)
			}
			if fe.File != filepath.Join(dir, TokenizerFile) || fe.Key != tt.wantKey {
				t.Fatalf("error names %q key %q, want %q key %q", fe.File, fe.Key, filepath.Join(dir, TokenizerFile), tt.wantKey)
			}
		})
	}
}

// TestLoadBadConfig checks that a broken tokenizer_config.json is named.
func TestLoadBadConfig(t *testing.T) {
	dir := t.TempDir()
	file := `{"pre_tokenizer":{"type":"ByteLevel"},"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`
	os.WriteFile(filepath.Join(dir, TokenizerFile), []byte(file), 0o644)
	os.WriteFile(filepath.Join(dir, ConfigFile), []byte(`{"chat_template": 7}`), 0o644)
	_, err := Load(dir)
	var fe *FileError
	if !errors.As(err, &fe) || fe.File != filepath.Join(dir, ConfigFile) || fe.Key != "chat_template" {
		t.Fatalf("got %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing directory loaded")
	}
}

// TestSpecialTokens checks Encode's addSpecial: the Llama tokenizer
// classes add the beginning-of-text token (DeepSeek V3 is one), files
// whose post-processor only adjusts offsets add nothing.
func TestSpecialTokens(t *testing.T) {
	tests := []struct {
		fam  string
		want []uint32
	}{
		{"deepseek_v3", []uint32{0, 23166}},
		{"qwen3", []uint32{13048}},
		{"llama3", []uint32{13347}},
	}
	for _, tt := range tests {
		t.Run(tt.fam, func(t *testing.T) {
			if got := loadFamily(t, tt.fam).Encode("Hi", true, nil); !equalIDs(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTemplateProcessing checks a TemplateProcessing post-processor (the
// form Meta's own Llama 3 file has) and the added-token options.
func TestTemplateProcessing(t *testing.T) {
	file := `{
	 "added_tokens":[{"id":3,"content":"<s>","special":true},{"id":4,"content":"<x>","lstrip":true,"rstrip":true},{"id":5,"content":"w","single_word":true}],
	 "pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},
	 "model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"Ġ":6,"w":7,"Ġa":8},"merges":["a b", "Ġ a"]},
	 "post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],
	   "special_tokens":{"<s>":{"id":"<s>","ids":[3],"tokens":["<s>"]}}}}`
	tok, err := New([]byte(file), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, text string
		special    bool
		want       []uint32
	}{
		{"bos added", "ab", true, []uint32{3, 2}},
		{"no bos", "ab", false, []uint32{2}},
		{"special in text", "<s>ab", false, []uint32{3, 2}},
		{"lstrip and rstrip", "ab <x> ab", false, []uint32{2, 4, 2}},
		{"single word inside a word", "awa", false, []uint32{0, 7, 0}},
		{"single word alone", "a w a", false, []uint32{0, 6, 5, 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tok.Encode(tt.text, tt.special, nil); !equalIDs(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestEncodeConcurrent encodes from several goroutines at once; run with
// -race it checks the pool and the word cache.
func TestEncodeConcurrent(t *testing.T) {
	tok := loadFamily(t, "qwen3")
	p := loadPieces(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				s := corpusPrompt(p, uint32(g*1000+i), 0)
				a := tok.Encode(s, false, nil)
				b := tok.Encode(s, false, nil)
				if !equalIDs(a, b) {
					t.Errorf("goroutine %d prompt %d: encodings differ", g, i)
				}
			}
		}()
	}
	wg.Wait()
}

// TestInvalidUTF8 checks that invalid bytes encode as U+FFFD.
func TestInvalidUTF8(t *testing.T) {
	tok := loadFamily(t, "llama3")
	got := tok.Encode("a\xffb", false, nil)
	want := tok.Encode("a\uFFFDb", false, nil)
	if !equalIDs(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestHeapMatchesScan checks the two merge strategies on long words.
func TestHeapMatchesScan(t *testing.T) {
	tok := loadFamily(t, "qwen3")
	p := loadPieces(t)
	var sc scratch
	for i := range 300 {
		w := corpusPrompt(p, uint32(900000+i), 0)
		if len(w) > 400 {
			w = w[:400]
		}
		w = strings.ToValidUTF8(w, "")
		var syms []uint32
		for j := 0; j < len(w); j++ {
			syms = append(syms, tok.model.byteID[w[j]])
		}
		a := tok.model.mergeScan(append([]uint32(nil), syms...))
		b := tok.model.mergeHeap(append([]uint32(nil), syms...), &sc)
		if !equalIDs(a, b) {
			t.Fatalf("word %q: scan %v heap %v", w, a, b)
		}
	}
	_ = utf8.RuneError
}

func TestLoadReadsACompressedTokenizerFile(t *testing.T) {
	tok, err := Load("testdata/qwen3")
	if err != nil {
		t.Fatal(err)
	}
	if ids := tok.Encode("hello world", false, nil); len(ids) != 2 {
		t.Fatalf("ids = %v", ids)
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Fatalf("a directory without tokenizer.json: %v", err)
	}
}
