package routing

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkBlockHashes hashes a 12,288-token prompt at block size 64 (the
// request path's hashing step). BenchmarkXXH3Bytes hashes the same bytes in
// one call: the floor that chaining and block splitting are compared with.
func BenchmarkBlockHashes(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	toks := make([]uint32, 12288)
	for i := range toks {
		toks[i] = r.Uint32N(150000)
	}
	dst := make([]SeqHash, 0, 192)
	b.SetBytes(int64(len(toks) * 4))
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = BlockHashes(dst[:0], toks, 64, HashSeed)
	}
}

func BenchmarkXXH3Bytes(b *testing.B) {
	toks := make([]uint32, 12288)
	b.SetBytes(int64(len(toks) * 4))
	b.ReportAllocs()
	for b.Loop() {
		_ = HashBlock(toks, HashSeed)
	}
}
