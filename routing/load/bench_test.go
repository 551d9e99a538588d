package load

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// benchTracker books 8 active requests on each of n workers, each a prefix
// of a shared 64-block prompt of random length, the shape of a fleet serving
// one long system prompt.
func benchTracker(b *testing.B, n int) (*Tracker, []routing.SeqHash, []routing.Match) {
	r := rand.New(rand.NewPCG(1, 2))
	locals := make([]uint64, 64)
	for i := range locals {
		locals[i] = r.Uint64()
	}
	prompt := chain(locals...)
	tr := newTracker(b, DefaultConfig(16))
	matches := make([]routing.Match, n)
	for w := range matches {
		matches[w].Worker = routing.Worker{ID: routing.WorkerID(w)}
		for k := range 8 {
			blocks := r.IntN(len(prompt))
			id := fmt.Sprintf("%d-%d", w, k)
			mustAdd(b, tr, Request{ID: id, Worker: matches[w].Worker, Hashes: prompt[:blocks], ISLTokens: 16*blocks + 7}, t0)
		}
	}
	return tr, prompt, matches
}

// BenchmarkPotential projects a 64-block request onto 16 and 256 workers.
// ns/worker is the cost of one worker's projection.
func BenchmarkPotential(b *testing.B) {
	for _, n := range []int{16, 256} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			tr, prompt, matches := benchTracker(b, n)
			q := Query{Hashes: prompt, ISLTokens: 16*len(prompt) + 3}
			dst := make([]routing.Load, 0, n)
			b.ReportAllocs()
			for b.Loop() {
				dst, _ = tr.Potential(dst[:0], q, matches)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/worker")
		})
	}
}

// BenchmarkAddFree books and frees one 64-block request on a worker that
// already holds 8 overlapping ones: the per-request bookkeeping cost.
func BenchmarkAddFree(b *testing.B) {
	tr, prompt, matches := benchTracker(b, 16)
	req := Request{ID: "bench", Worker: matches[3].Worker, Hashes: prompt, ISLTokens: 16 * len(prompt)}
	b.ReportAllocs()
	for b.Loop() {
		if err := tr.Add(req, t0); err != nil {
			b.Fatal(err)
		}
		tr.Free(req.ID)
	}
}
