package routing

import (
	"encoding/binary"
	"testing"

	"github.com/zeebo/xxh3"
	"pgregory.net/rapid"
)

func TestKnownVector(t *testing.T) {
	const want uint64 = 13226331709069118873
	if got := xxh3.HashSeed([]byte("test data"), HashSeed); got != want {
		t.Fatalf("xxh3(\"test data\", 1337) = %d, want %d", got, want)
	}
}

func TestHashBlockMatchesLittleEndianBytes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		toks := rapid.SliceOfN(rapid.Uint32(), 1, 300).Draw(t, "tokens")
		seed := rapid.Uint64().Draw(t, "seed")
		b := make([]byte, 4*len(toks))
		for i, x := range toks {
			binary.LittleEndian.PutUint32(b[4*i:], x)
		}
		if got, want := HashBlock(toks, seed), LocalHash(xxh3.HashSeed(b, seed)); got != want {
			t.Fatalf("HashBlock = %d, want %d", got, want)
		}
	})
}

func TestChainIsXXH3OfSixteenBytes(t *testing.T) {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], 7)
	binary.LittleEndian.PutUint64(b[8:], 9)
	if got, want := Chain(7, 9), SeqHash(xxh3.HashSeed(b[:], 1337)); got != want {
		t.Fatalf("Chain(7,9) = %d, want %d", got, want)
	}
}

func TestSeed(t *testing.T) {
	tests := []struct {
		name, lora, salt string
		want             uint64
	}{
		{name: "base", want: 1337},
		{name: "lora", lora: "sql-adapter", want: 1337 + xxh3.HashString("sql-adapter")},
		{name: "salt", salt: "tenant-a", want: 1337 + xxh3.HashStringSeed("tenant-a", 1)},
		{name: "both", lora: "x", salt: "y", want: 1337 + xxh3.HashString("x") + xxh3.HashStringSeed("y", 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Seed(tc.lora, tc.salt); got != tc.want {
				t.Fatalf("Seed(%q,%q) = %d, want %d", tc.lora, tc.salt, got, tc.want)
			}
		})
	}
}

func TestBlockHashesChainsAndDropsTail(t *testing.T) {
	toks := make([]uint32, 10)
	for i := range toks {
		toks[i] = uint32(i)
	}
	got, err := BlockHashes(nil, toks, 4, HashSeed)
	if err != nil {
		t.Fatal(err)
	}
	l0, l1 := HashBlock(toks[0:4], HashSeed), HashBlock(toks[4:8], HashSeed)
	want := []SeqHash{SeqHash(l0), Chain(SeqHash(l0), l1)}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("BlockHashes = %v, want %v", got, want)
	}
	if _, err := BlockHashes(nil, toks, 0, HashSeed); err == nil {
		t.Fatal("block size 0 accepted")
	}
}

// A two-block vector pins the chain seed: a change to it breaks
// compatibility with every engine's event stream.
func TestTwoBlockVector(t *testing.T) {
	toks := []uint32{1, 2, 3, 4, 5, 6, 7, 8}
	got, _ := BlockHashes(nil, toks, 4, HashSeed)
	locals, _ := LocalHashes(nil, toks, 4, HashSeed)
	if seq := SeqHashes(nil, locals); seq[0] != got[0] || seq[1] != got[1] {
		t.Fatalf("SeqHashes %v != BlockHashes %v", seq, got)
	}
	// A prefix's hashes do not depend on what follows it.
	one, _ := BlockHashes(nil, toks[:4], 4, HashSeed)
	if one[0] != got[0] {
		t.Fatal("prefix hash changed with suffix")
	}
	if Chain(got[0], locals[1]) == Chain(got[0], locals[0]) {
		t.Fatal("chain ignores the local hash")
	}
}

func TestPrefixProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		bs := rapid.IntRange(1, 32).Draw(t, "bs")
		a := rapid.SliceOfN(rapid.Uint32Range(0, 3), 0, 200).Draw(t, "a")
		b := rapid.SliceOfN(rapid.Uint32Range(0, 3), 0, 200).Draw(t, "b")
		ha, _ := BlockHashes(nil, a, bs, HashSeed)
		hb, _ := BlockHashes(nil, b, bs, HashSeed)
		common := 0
		for common < len(a) && common < len(b) && a[common] == b[common] {
			common++
		}
		for i := 0; i < len(ha) && i < len(hb); i++ {
			same := ha[i] == hb[i]
			if want := (i+1)*bs <= common; same != want {
				t.Fatalf("block %d: equal=%v, want %v (common %d tokens)", i, same, want, common)
			}
		}
	})
}

func TestTextHashes(t *testing.T) {
	text := "abcdefghij"
	got, err := TextHashes(nil, text, 4, TextSeed("m", "", ""))
	if err != nil || len(got) != 2 {
		t.Fatalf("TextHashes = %v, %v", got, err)
	}
	other, _ := TextHashes(nil, text, 4, TextSeed("other", "", ""))
	if other[0] == got[0] {
		t.Fatal("model does not fold into the text seed")
	}
	if _, err := TextHashes(nil, text, -1, 0); err == nil {
		t.Fatal("negative chunk accepted")
	}
}

func TestBlockHashesZeroAlloc(t *testing.T) {
	toks := make([]uint32, 12288)
	dst := make([]SeqHash, 0, 192)
	allocs := testing.AllocsPerRun(20, func() {
		dst, _ = BlockHashes(dst[:0], toks, 64, HashSeed)
	})
	if allocs != 0 {
		t.Fatalf("BlockHashes allocates %.1f times per call", allocs)
	}
}

func TestChainMatchesXXH3(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, l := rapid.Uint64().Draw(t, "parent"), rapid.Uint64().Draw(t, "local")
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:8], p)
		binary.LittleEndian.PutUint64(b[8:], l)
		if got, want := Chain(SeqHash(p), LocalHash(l)), SeqHash(xxh3.HashSeed(b[:], HashSeed)); got != want {
			t.Fatalf("Chain(%d,%d) = %d, want %d", p, l, got, want)
		}
	})
}

func TestSeededLongPathMatchesXXH3(t *testing.T) {
	long := fastLong(HashSeed)
	if long == nil {
		t.Skip("no fast long path on this CPU")
	}
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOfN(rapid.Byte(), 241, 5000).Draw(t, "b")
		if got, want := long.hash(b), xxh3.HashSeed(b, HashSeed); got != want {
			t.Fatalf("len %d: got %x want %x", len(b), got, want)
		}
	})
	b := make([]byte, 4097)
	for n := 241; n <= len(b); n++ {
		for i := range b[:n] {
			b[i] = byte(i*31 + n)
		}
		if got, want := long.hash(b[:n]), xxh3.HashSeed(b[:n], HashSeed); got != want {
			t.Fatalf("len %d: got %x want %x", n, got, want)
		}
	}
}
