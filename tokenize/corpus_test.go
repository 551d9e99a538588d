package tokenize

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The corpus: prompts built from testdata/pieces.json by the same
// generator as testdata/gen/corpus.mjs, which wrote the reference ids.
const (
	corpusSeed  = 20261203
	corpusCount = 2000
	longSeed    = 77000
	longCount   = 3
	longPieces  = 2150
	benchSeed   = 12288
	benchPieces = 820
)

// families are the tokenizers under testdata/, by directory.
var families = []string{"llama3", "qwen3", "deepseek_v3", "gptoss"}

// frozenTime is the clock gen.mjs froze while rendering templates.
var frozenTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type corpusPieces struct {
	Pieces     []string `json:"pieces"`
	Separators []string `json:"separators"`
}

var (
	piecesOnce sync.Once
	pieces     corpusPieces
)

func loadPieces(tb testing.TB) corpusPieces {
	piecesOnce.Do(func() {
		b, err := os.ReadFile("testdata/pieces.json")
		if err == nil {
			err = json.Unmarshal(b, &pieces)
		}
		if err != nil {
			tb.Fatal(err)
		}
	})
	return pieces
}

// mulberry32 is the corpus generator's 32-bit PRNG.
func mulberry32(seed uint32) func() uint32 {
	a := seed
	return func() uint32 {
		a += 0x6d2b79f5
		t := (a ^ a>>15) * (1 | a)
		t = (t + (t^t>>7)*(61|t)) ^ t
		return t ^ t>>14
	}
}

// corpusPrompt builds prompt seed from n pieces (n = 0: from 1 to 12).
func corpusPrompt(p corpusPieces, seed uint32, n int) string {
	r := mulberry32(seed)
	if n == 0 {
		n = 1 + int(r()%12)
	}
	var b bytes.Buffer
	for k := 0; k < n; k++ {
		piece := p.Pieces[r()%uint32(len(p.Pieces))]
		if r()%4 == 0 {
			cps := []rune(piece)
			a := r() % uint32(len(cps)+1)
			e := a + r()%(uint32(len(cps))-a+1)
			piece = string(cps[a:e])
		}
		b.WriteString(piece)
		b.WriteString(p.Separators[r()%uint32(len(p.Separators))])
	}
	return b.String()
}

var (
	famMu    sync.Mutex
	famCache = map[string]*Tokenizer{}
)

// loadFamily builds the tokenizer of a testdata family once per test run.
func loadFamily(tb testing.TB, fam string) *Tokenizer {
	famMu.Lock()
	defer famMu.Unlock()
	if t, ok := famCache[fam]; ok {
		return t
	}
	tj := readGz(tb, filepath.Join("testdata", fam, "tokenizer.json.gz"))
	cj, err := os.ReadFile(filepath.Join("testdata", fam, "tokenizer_config.json"))
	if err != nil {
		tb.Fatal(err)
	}
	t, err := New(tj, cj, WithClock(func() time.Time { return frozenTime }))
	if err != nil {
		tb.Fatalf("%s: %v", fam, err)
	}
	famCache[fam] = t
	return t
}

func readGz(tb testing.TB, path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(zr); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

type expectedIDs struct {
	IDs  [][]uint32 `json:"ids"`
	Long [][]uint32 `json:"long"`
}

// TestCorpusMatchesReference encodes every corpus prompt with each family
// and compares the ids with the reference's.
func TestCorpusMatchesReference(t *testing.T) {
	p := loadPieces(t)
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			tok := loadFamily(t, fam)
			var want expectedIDs
			if err := json.Unmarshal(readGz(t, filepath.Join("testdata", fam, "expected_ids.json.gz")), &want); err != nil {
				t.Fatal(err)
			}
			if len(want.IDs) != corpusCount || len(want.Long) != longCount {
				t.Fatalf("reference has %d prompts and %d long ones", len(want.IDs), len(want.Long))
			}
			fails := 0
			check := func(name, text string, want []uint32) {
				got := tok.Encode(text, false, nil)
				if !equalIDs(got, want) && fails < 5 {
					fails++
					i := firstDiff(got, want)
					t.Errorf("%s: ids differ from position %d of %d/%d\ntext %q\ngot  %v\nwant %v",
						name, i, len(got), len(want), text, window(got, i), window(want, i))
				}
			}
			for i := range corpusCount {
				check("prompt "+itoa(i), corpusPrompt(p, corpusSeed+uint32(i), 0), want.IDs[i])
			}
			for i := range longCount {
				check("long "+itoa(i), corpusPrompt(p, longSeed+uint32(i), longPieces), want.Long[i])
			}
		})
	}
}

func equalIDs(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func firstDiff(a, b []uint32) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

func window(a []uint32, i int) []uint32 {
	lo, hi := max(0, i-3), min(len(a), i+5)
	return a[lo:hi]
}
