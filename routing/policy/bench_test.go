package policy

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// benchCands builds n candidates with random overlaps and loads for a
// 64-block request, the shape of a KV-routed fleet.
func benchCands(n int) []Candidate {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]Candidate, n)
	for i := range out {
		dev := int32(r.IntN(64))
		out[i] = Candidate{
			Info:    routing.WorkerInfo{Worker: routing.Worker{ID: routing.WorkerID(i)}, BlockSize: 16, TotalBlocks: 16384, MaxBatchedTokens: 8192},
			Overlap: routing.Overlap{Device: dev, Host: int32(r.IntN(8))},
			Load: routing.Load{
				PrefillTokens:  int64(r.IntN(8192)) + max(0, 1024-16*int64(dev)),
				DecodeBlocks:   int64(r.IntN(4096)),
				ActiveRequests: int64(r.IntN(64)),
			},
		}
	}
	return out
}

// BenchmarkKVSelect scores and picks among 16 and 256 candidates at
// temperature 0 and 0.5; ns/candidate is the per-worker cost of scoring.
func BenchmarkKVSelect(b *testing.B) {
	for _, temp := range []float64{0, 0.5} {
		for _, n := range []int{16, 256} {
			b.Run(fmt.Sprintf("T=%v/candidates=%d", temp, n), func(b *testing.B) {
				cfg := DefaultKVConfig()
				cfg.Temperature = temp
				cfg.OverlapScoreCreditDecay = 1
				kv, _ := NewKV(cfg, rand.New(rand.NewPCG(3, 4)))
				cands := benchCands(n)
				req := &Request{ISLTokens: 1024, BlockSize: 16}
				var d Decision
				b.ReportAllocs()
				for b.Loop() {
					if err := kv.Select(&d, req, cands); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/candidate")
			})
		}
	}
}

// BenchmarkKVTTFTSelect scores and picks among 16 and 256 candidates with
// the balance term off and on (its defaults); the difference is the
// term's map lookups and lock.
func BenchmarkKVTTFTSelect(b *testing.B) {
	for _, balance := range []float64{0, DefaultKVTTFTConfig().BalanceWeight} {
		for _, n := range []int{16, 256} {
			b.Run(fmt.Sprintf("balance=%v/candidates=%d", balance, n), func(b *testing.B) {
				cfg := DefaultKVTTFTConfig()
				cfg.BalanceWeight = balance
				s, _ := NewKVTTFT(cfg, rand.New(rand.NewPCG(3, 4)))
				cands := benchCands(n)
				req := &Request{ISLTokens: 1024, BlockSize: 16}
				var d Decision
				b.ReportAllocs()
				for b.Loop() {
					if err := s.Select(&d, req, cands); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/candidate")
			})
		}
	}
}

// BenchmarkRoute is the whole pipeline (filters with a busy threshold, then
// the kv selector) over 256 candidates.
func BenchmarkRoute(b *testing.B) {
	kv, _ := NewKV(DefaultKVConfig(), rand.New(rand.NewPCG(3, 4)))
	p, _ := NewPipeline(Thresholds{ActiveDecodeBlocks: new(0.9)}, kv)
	cands := benchCands(256)
	req := &Request{ISLTokens: 1024, BlockSize: 16}
	var d Decision
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Route(&d, req, cands); err != nil {
			b.Fatal(err)
		}
	}
}
