package index

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkTableInsertDelete inserts and deletes a fresh key in a table of
// a million keys (one op = one insert plus one delete), the block table's
// share of a store and a removal.
func BenchmarkTableInsertDelete(b *testing.B) {
	var tb table[owners]
	r := rand.New(rand.NewPCG(1, 1))
	for range 1_000_000 {
		tb.put(r.Uint64()|1, owners{a: 8})
	}
	keys := make([]uint64, 4096)
	for i := range keys {
		keys[i] = r.Uint64() | 1
	}
	i := 0
	for b.Loop() {
		k := keys[i&4095]
		i++
		tb.put(k, owners{a: 8})
		tb.del(k)
	}
	b.ReportMetric(float64(tb.n)/float64(tb.cap), "load")
}
