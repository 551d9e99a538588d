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

// BenchmarkAddFreeLong books and frees a 192-block prompt (12,288 tokens
// at block size 64) on an idle worker and on one holding 8 other prompts
// of the same shape, half of which share a 64-block prefix with it: the
// bookkeeping of one long request at the node's latency target.
func BenchmarkAddFreeLong(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	prompt := func(prefix []uint64) []routing.SeqHash {
		locals := append([]uint64(nil), prefix...)
		for len(locals) < 192 {
			locals = append(locals, r.Uint64())
		}
		return chain(locals...)
	}
	shared := make([]uint64, 64)
	for i := range shared {
		shared[i] = r.Uint64()
	}
	for _, busy := range []int{0, 8} {
		b.Run(fmt.Sprintf("others=%d", busy), func(b *testing.B) {
			tr := newTracker(b, DefaultConfig(64))
			w := routing.Worker{ID: 1}
			for k := range busy {
				var pre []uint64
				if k%2 == 0 {
					pre = shared
				}
				mustAdd(b, tr, Request{ID: fmt.Sprint("other-", k), Worker: w, Hashes: prompt(pre), ISLTokens: 64 * 192}, t0)
			}
			req := Request{ID: "bench", Worker: w, Hashes: prompt(shared), ISLTokens: 64 * 192}
			b.ReportAllocs()
			for b.Loop() {
				if err := tr.Add(req, t0); err != nil {
					b.Fatal(err)
				}
				tr.Free(req.ID)
			}
		})
	}
}
