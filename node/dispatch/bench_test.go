package dispatch

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
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
	d, _, _, tokens := benchFleet(b)
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
		cands, preq := benchCandidates(b, d, tokens)
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

// benchCandidates returns the candidates the dispatcher compares for the
// request, with their overlaps and projected loads, once.
func benchCandidates(b *testing.B, d *Dispatcher, tokens []uint32) ([]policy.Candidate, *policy.Request) {
	r := &Request{ID: "probe", Model: "m", Tokens: tokens}
	q := &policy.Query{ID: r.ID, Model: r.Model, ISLTokens: len(tokens)}
	q.Ranks, _ = d.engines.Workers(r.Model)
	var sc policy.Scratch
	if err := d.core.Candidates(&sc, q, d.cfg.Now()); err != nil {
		b.Fatal(err)
	}
	if err := hash(&sc, r); err != nil {
		b.Fatal(err)
	}
	d.core.Match(&sc)
	if _, err := d.core.Choose(t0ctx, &sc, q); err != nil {
		b.Fatal(err)
	}
	return slices.Clone(sc.Candidates()), &policy.Request{ISLTokens: len(tokens), BlockSize: testBlockSize}
}
