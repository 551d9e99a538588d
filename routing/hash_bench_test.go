package routing

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// The hashing benchmarks hash a 12,288-token prompt at block size 64, the
// request path's hashing step. BlockHashesLibrary is the same chain with
// every block hashed by zeebo/xxh3 (the design before the cached-secret long
// path); XXH3Bytes is one library call over the same 48 KiB, the floor.

func benchTokens() []uint32 {
	r := rand.New(rand.NewPCG(1, 2))
	toks := make([]uint32, 12288)
	for i := range toks {
		toks[i] = r.Uint32N(150000)
	}
	return toks
}

func BenchmarkBlockHashes(b *testing.B) {
	toks := benchTokens()
	dst := make([]SeqHash, 0, 192)
	b.SetBytes(int64(len(toks) * 4))
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = BlockHashes(dst[:0], toks, 64, HashSeed)
	}
}

func BenchmarkBlockHashesLibrary(b *testing.B) {
	toks := benchTokens()
	bs := unsafe.Slice((*byte)(unsafe.Pointer(&toks[0])), len(toks)*4)
	dst := make([]SeqHash, 0, 192)
	b.SetBytes(int64(len(bs)))
	b.ReportAllocs()
	for b.Loop() {
		dst = dst[:0]
		prev := SeqHash(xxh3.HashSeed(bs[:256], HashSeed))
		dst = append(dst, prev)
		for off := 256; off < len(bs); off += 256 {
			prev = Chain(prev, LocalHash(xxh3.HashSeed(bs[off:off+256], HashSeed)))
			dst = append(dst, prev)
		}
	}
}

func BenchmarkXXH3Bytes(b *testing.B) {
	toks := benchTokens()
	bs := unsafe.Slice((*byte)(unsafe.Pointer(&toks[0])), len(toks)*4)
	b.SetBytes(int64(len(bs)))
	b.ReportAllocs()
	for b.Loop() {
		_ = xxh3.HashSeed(bs, HashSeed)
	}
}
