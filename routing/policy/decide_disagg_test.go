package policy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

var disaggT0 = time.Unix(1_700_000_000, 0)

const disaggBS = 16

// disaggFleet is a model's ranks: prefill engines 1 and 2, decode
// engines 3 and 4, with the given transfer domains (by engine, "" for
// none).
func disaggFleet(domains map[routing.WorkerID]string) []routing.WorkerInfo {
	var out []routing.WorkerInfo
	for id := routing.WorkerID(1); id <= 4; id++ {
		role := routing.RolePrefill
		if id > 2 {
			role = routing.RoleDecode
		}
		out = append(out, routing.WorkerInfo{Worker: routing.Worker{ID: id}, Model: "m", BlockSize: disaggBS,
			TotalBlocks: 1000, MaxBatchedTokens: 8192, Role: role, TransferDomain: domains[id]})
	}
	return out
}

// newTestDisagg builds a disaggregated decision path with the kv policy,
// an in-memory session store and an exact index.
func newTestDisagg(t *testing.T) (*Disagg, *index.Exact) {
	t.Helper()
	b, err := NewMemBindings(MemConfig{TTL: time.Hour, MaxSessions: 16})
	if err != nil {
		t.Fatal(err)
	}
	idx := index.NewExact()
	cfg := DeciderConfig{Policy: NameKV, Options: DefaultOptions(nil), Seed: 7, Bindings: b, MaxSessions: 16,
		Now: func() time.Time { return disaggT0 }}
	g, err := NewDisagg(cfg, idx)
	if err != nil {
		t.Fatal(err)
	}
	return g, idx
}

// disaggStore makes engine id hold the first n blocks of the prompt whose
// tokens start at base.
func disaggStore(t *testing.T, idx *index.Exact, id routing.WorkerID, base uint32, n int) {
	t.Helper()
	locals, err := routing.LocalHashes(nil, disaggTokens(base, n*disaggBS), disaggBS, routing.HashSeed)
	if err != nil {
		t.Fatal(err)
	}
	ev := routing.Event{Worker: routing.Worker{ID: id}, ID: 1, Kind: routing.EventStored}
	for i, l := range locals {
		ev.Blocks = append(ev.Blocks, routing.StoredBlock{Engine: routing.EngineHash(uint64(id)<<32 | uint64(i+1)), Local: l})
	}
	if err := idx.Apply(&ev); err != nil {
		t.Fatal(err)
	}
}

func disaggTokens(base uint32, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = base + uint32(i)
	}
	return out
}

// decidePair runs one disaggregated decision and books it.
func decidePair(t *testing.T, g *Disagg, ds *DisaggScratch, q *Query, tokens []uint32) (Pair, PairBooking) {
	t.Helper()
	ctx := context.Background()
	if err := g.Candidates(ctx, ds, q, disaggT0); err != nil {
		t.Fatal(err)
	}
	var err error
	ds.Prefill.Hashes, err = routing.BlockHashes(ds.Prefill.Hashes[:0], tokens, ds.Prefill.BlockSize(), routing.HashSeed)
	if err != nil {
		t.Fatal(err)
	}
	g.Match(ds)
	p, err := g.Choose(ctx, ds, q)
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.Book(ctx, ds, &p)
	if err != nil {
		t.Fatal(err)
	}
	return p, b
}

// TestDisaggPairFollowsCacheThenDecodeLoad: the prefill rank is the one
// holding the prompt's prefix; the decode rank the less loaded of the
// decode ranks, even when the other decode rank holds the prefix.
func TestDisaggPairFollowsCacheThenDecodeLoad(t *testing.T) {
	g, idx := newTestDisagg(t)
	tokens := disaggTokens(100, 20*disaggBS)
	disaggStore(t, idx, 2, 100, 20)
	disaggStore(t, idx, 4, 100, 20)
	var ds DisaggScratch
	q := &Query{ID: "a", Model: "m", Ranks: disaggFleet(nil), ISLTokens: len(tokens), OutputTokens: 100}
	p, b := decidePair(t, g, &ds, q, tokens)
	if p.Prefill.Worker.ID != 2 || p.Prefill.CachedBlocks != 20 {
		t.Fatalf("prefill on %v with %d cached, want engine 2 with 20", p.Prefill.Worker, p.Prefill.CachedBlocks)
	}
	if p.Decode.Worker.ID != 3 && p.Decode.Worker.ID != 4 {
		t.Fatalf("decode on %v, want a decode engine", p.Decode.Worker)
	}
	first := p.Decode.Worker
	// The first request's blocks are booked on its decode rank, so the
	// next goes to the other one, cache or not.
	q2 := &Query{ID: "b", Model: "m", Ranks: disaggFleet(nil), ISLTokens: len(tokens), OutputTokens: 100}
	p2, b2 := decidePair(t, g, &ds, q2, tokens)
	if p2.Decode.Worker == first {
		t.Fatalf("second decode on the loaded %v", first)
	}
	if p2.Prefill.Worker.ID != 2 {
		t.Fatalf("second prefill on %v, want the caching engine 2", p2.Prefill.Worker)
	}
	if n := g.Booked(); n != 4 {
		t.Fatalf("%d bookings, want 2 per request", n)
	}
	for _, pb := range []*PairBooking{&b, &b2} {
		pb.Prefill.Done(context.Background(), Succeeded)
		pb.Decode.Done(context.Background(), Succeeded)
	}
	if n := g.Booked(); n != 0 {
		t.Fatalf("%d bookings after both hops ended", n)
	}
}

// TestDisaggSessionPinsDecode: a session's decode rank is bound by its
// first request and kept by the next, whose prefill follows the cache to
// another prefill rank.
func TestDisaggSessionPinsDecode(t *testing.T) {
	g, idx := newTestDisagg(t)
	var ds DisaggScratch
	first := disaggTokens(1, 4*disaggBS)
	q := &Query{ID: "a", Model: "m", Ranks: disaggFleet(nil), ISLTokens: len(first), SessionKey: "s"}
	p, b := decidePair(t, g, &ds, q, first)
	b.Prefill.Done(context.Background(), Succeeded)
	b.Decode.Done(context.Background(), Succeeded)
	bound := p.Decode.Worker
	// The next prompt is cached on the other prefill engine.
	other := routing.WorkerID(3 - p.Prefill.Worker.ID)
	second := disaggTokens(5000, 30*disaggBS)
	disaggStore(t, idx, other, 5000, 30)
	q2 := &Query{ID: "b", Model: "m", Ranks: disaggFleet(nil), ISLTokens: len(second), SessionKey: "s"}
	p2, b2 := decidePair(t, g, &ds, q2, second)
	defer b2.Decode.Done(context.Background(), Succeeded)
	defer b2.Prefill.Done(context.Background(), Succeeded)
	if p2.Decode.Worker != bound || !p2.Decode.Bound {
		t.Fatalf("decode on %v (bound %v), want the session's %v", p2.Decode.Worker, p2.Decode.Bound, bound)
	}
	if p2.Prefill.Worker.ID != other {
		t.Fatalf("prefill on %v, want the caching engine %d", p2.Prefill.Worker, other)
	}
}

// TestDisaggTransferDomain: a decode rank is chosen in its prefill rank's
// transfer domain, and a prefill rank that reaches no decode rank is not
// a candidate even when it holds the prefix.
func TestDisaggTransferDomain(t *testing.T) {
	g, idx := newTestDisagg(t)
	tokens := disaggTokens(100, 20*disaggBS)
	disaggStore(t, idx, 1, 100, 20)
	var ds DisaggScratch
	// Engine 1 (rack-a) caches the prompt, but no decode rank is in
	// rack-a; engine 2 and decode engine 4 are in rack-b.
	domains := map[routing.WorkerID]string{1: "rack-a", 2: "rack-b", 3: "rack-c", 4: "rack-b"}
	for i := range 4 {
		q := &Query{ID: string(rune('a' + i)), Model: "m", Ranks: disaggFleet(domains), ISLTokens: len(tokens)}
		p, _ := decidePair(t, g, &ds, q, tokens)
		if p.Prefill.Worker.ID != 2 || p.Decode.Worker.ID != 4 {
			t.Fatalf("pair %v -> %v, want 2 -> 4 (rack-b)", p.Prefill.Worker, p.Decode.Worker)
		}
	}
}

// TestDisaggNoPrefillWorker: without a prefill rank, or with every one
// suspected, Candidates fails with ErrNoPrefillWorker.
func TestDisaggNoPrefillWorker(t *testing.T) {
	g, _ := newTestDisagg(t)
	var ds DisaggScratch
	ranks := disaggFleet(nil)[2:]
	q := &Query{ID: "a", Model: "m", Ranks: ranks, ISLTokens: 64}
	if err := g.Candidates(context.Background(), &ds, q, disaggT0); !errors.Is(err, ErrNoPrefillWorker) {
		t.Fatalf("no prefill rank: %v", err)
	}
	g.Prefill().suspect(1)
	g.Prefill().suspect(2)
	q.Ranks = disaggFleet(nil)
	if err := g.Candidates(context.Background(), &ds, q, disaggT0); !errors.Is(err, ErrNoPrefillWorker) || !errors.Is(err, ErrNoCompatibleWorker) {
		t.Fatalf("every prefill rank suspected: %v", err)
	}
}

// TestDisaggLayoutServing: how a model serves by the roles of its ranks.
func TestDisaggLayoutServing(t *testing.T) {
	agg := routing.WorkerInfo{Worker: routing.Worker{ID: 9}}
	fleet := disaggFleet(nil)
	tests := []struct {
		name     string
		ranks    []routing.WorkerInfo
		fallback bool
		want     Serving
		whole    int
		err      error
	}{
		{name: "aggregated only", ranks: []routing.WorkerInfo{agg}, want: ServeAggregated, whole: 1},
		{name: "prefill and decode", ranks: fleet, want: ServeDisaggregated},
		{name: "prefill and decode beside aggregated", ranks: append([]routing.WorkerInfo{agg}, fleet...), want: ServeDisaggregated},
		{name: "decode only, fallback", ranks: append([]routing.WorkerInfo{agg}, fleet[2:]...), fallback: true, want: ServeAggregated, whole: 3},
		{name: "decode only, no fallback", ranks: fleet[2:], err: ErrNoPrefillWorker},
		{name: "prefill only serves nothing whole", ranks: fleet[:2], want: ServeAggregated, whole: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var l Layout
			l.Split(tc.ranks)
			got, whole, err := l.Serving(tc.fallback, nil)
			if !errors.Is(err, tc.err) || (err == nil && (got != tc.want || len(whole) != tc.whole)) {
				t.Fatalf("Serving = %v %d ranks %v; want %v %d ranks %v", got, len(whole), err, tc.want, tc.whole, tc.err)
			}
		})
	}
}

// TestDisaggStages: the decode stage gives no cache credit and assumes no
// KV reuse; the prefill stage tracks no blocks and binds no session.
func TestDisaggStages(t *testing.T) {
	cfg := DeciderConfig{Options: DefaultOptions(nil), Bindings: &MemBindings{}}
	p, d := PrefillStage(cfg), DecodeStage(cfg)
	if p.Bindings != nil || !p.Tracking.NoActiveBlocks || p.Options.KV.OverlapScoreCredit != 1 {
		t.Fatalf("prefill stage %+v", p)
	}
	if d.Bindings == nil || d.Options.KV.OverlapScoreCredit != 0 || d.Options.KV.TrackPrefillTokens ||
		!d.Tracking.NoKVReuse || !d.Tracking.NoPrefillTokens || d.Seed == cfg.Seed {
		t.Fatalf("decode stage %+v", d)
	}
}

// disaggReports is a LoadReporter with fixed loads.
type disaggReports map[routing.Worker]routing.Load

func (r disaggReports) Load(w routing.Worker) (routing.Load, bool) {
	l, ok := r[w]
	return l, ok
}

// TestDisaggPrefillIgnoresReportedBlocks: the blocks a prefill engine
// reports (its requests' until the hand-off) do not count against the
// cache it holds, as the prefill stage tracks no blocks.
func TestDisaggPrefillIgnoresReportedBlocks(t *testing.T) {
	b, _ := NewMemBindings(MemConfig{TTL: time.Hour, MaxSessions: 16})
	idx := index.NewExact()
	reports := disaggReports{{ID: 2}: {DecodeBlocks: 500, ActiveRequests: 3}}
	cfg := DeciderConfig{Policy: NameKV, Options: DefaultOptions(nil), Seed: 7, Bindings: b, MaxSessions: 16,
		Reports: reports, Now: func() time.Time { return disaggT0 }}
	g, err := NewDisagg(cfg, idx)
	if err != nil {
		t.Fatal(err)
	}
	tokens := disaggTokens(100, 20*disaggBS)
	disaggStore(t, idx, 2, 100, 20)
	var ds DisaggScratch
	p, _ := decidePair(t, g, &ds, &Query{ID: "a", Model: "m", Ranks: disaggFleet(nil), ISLTokens: len(tokens)}, tokens)
	if p.Prefill.Worker.ID != 2 {
		t.Fatalf("prefill on %v, want the caching engine 2 despite its reported blocks", p.Prefill.Worker)
	}
}
