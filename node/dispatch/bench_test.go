package dispatch

import (
	"math/rand/v2"
	"testing"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/load"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// Benchmark shape: a 12,288-token pre-tokenized prompt (768 blocks of 16)
// over 16 single-rank engines. Every engine holds a 2,048-token system
// prompt and eight unrelated 12,288-token prompts (about 100k blocks in
// the index); engine 6 also holds the first 8,192 tokens of the request.
const (
	benchEngines = 16
	benchTokens  = 12_288
)

// benchFleet builds the populated fleet and returns the dispatcher and the
// request's tokens.
func benchFleet(b *testing.B) (*Dispatcher, *fakeEngines, *index.Exact, []uint32) {
	engines, idx := newFakeEngines(), index.NewExact()
	feed := newFeeder(b, idx)
	rng := rand.New(rand.NewPCG(1, 2))
	system := prompt(1, 2048)
	for i := 1; i <= benchEngines; i++ {
		engines.add(routing.WorkerID(i), "m", 1, testBlockSize)
		feed.store(w1(routing.WorkerID(i)), system)
		for range 8 {
			feed.store(w1(routing.WorkerID(i)), concat(system, prompt(rng.Uint32(), benchTokens-2048)))
		}
	}
	req := concat(system, prompt(7_000_000, benchTokens-2048))
	feed.store(w1(6), req[:8192])
	cfg := DefaultConfig()
	d, err := New(cfg, engines, idx, metrics.New(), nil)
	if err != nil {
		b.Fatal(err)
	}
	return d, engines, idx, req
}

// BenchmarkRoute12k compares, in one run, the dispatcher's whole decision
// path (validation, hashing, matching, load projection, selection,
// booking, and freeing on Done) with the bare policy pipeline on the same
// 16 candidates.
func BenchmarkRoute12k(b *testing.B) {
	d, engines, idx, tokens := benchFleet(b)
	b.Run("dispatch", func(b *testing.B) {
		r := &Request{ID: "bench", Model: "m", Tokens: tokens}
		b.ReportAllocs()
		for b.Loop() {
			dec, err := d.Route(t0ctx, r)
			if err != nil {
				b.Fatal(err)
			}
			if dec.Worker != w1(6) {
				b.Fatalf("routed to %v, want the prefix holder", dec.Worker)
			}
			dec.Done(nil)
		}
		b.ReportMetric(float64(len(tokens)), "tokens")
	})
	b.Run("pipeline", func(b *testing.B) {
		cands, preq := benchCandidates(b, engines, idx, tokens)
		sel, err := policy.New(policy.NameKV, policy.DefaultOptions(rand.New(rand.NewPCG(1, 2))))
		if err != nil {
			b.Fatal(err)
		}
		pipe, err := policy.NewPipeline(policy.Thresholds{}, sel)
		if err != nil {
			b.Fatal(err)
		}
		var dec policy.Decision
		b.ReportAllocs()
		for b.Loop() {
			if err := pipe.Route(&dec, preq, cands); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hashing", func(b *testing.B) {
		dst := make([]routing.SeqHash, 0, len(tokens)/testBlockSize)
		b.ReportAllocs()
		for b.Loop() {
			dst, _ = routing.BlockHashes(dst[:0], tokens, testBlockSize, routing.HashSeed)
		}
	})
}

// benchCandidates builds the candidates the dispatcher would build, once.
func benchCandidates(b *testing.B, engines *fakeEngines, idx *index.Exact, tokens []uint32) ([]policy.Candidate, *policy.Request) {
	hashes, _ := routing.BlockHashes(nil, tokens, testBlockSize, routing.HashSeed)
	matches := idx.FindMatches(hashes, nil)
	ranks, _ := engines.Workers("m")
	cands := make([]policy.Candidate, len(ranks))
	for i, in := range ranks {
		cands[i].Info = in
	}
	assignOverlaps(cands, matches)
	tr, err := load.New(load.DefaultConfig(testBlockSize))
	if err != nil {
		b.Fatal(err)
	}
	all := make([]routing.Match, len(cands))
	for i := range cands {
		all[i] = routing.Match{Worker: cands[i].Info.Worker, Overlap: cands[i].Overlap}
	}
	loads, err := tr.Potential(nil, load.Query{Hashes: hashes, ISLTokens: len(tokens)}, all)
	if err != nil {
		b.Fatal(err)
	}
	for i := range cands {
		cands[i].Load = loads[i]
	}
	return cands, &policy.Request{ISLTokens: len(tokens), BlockSize: testBlockSize}
}
