package mocker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

func newTestEngine(t *testing.T, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg, testWorker)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestSubmitRejects(t *testing.T) {
	locals := make([]routing.LocalHash, 2)
	tests := []struct {
		name string
		cfg  Config
		req  Request
		want error
	}{
		{name: "empty id", req: Request{Tokens: []uint32{1}, MaxTokens: 1}, want: ErrBadRequest},
		{name: "no output", req: Request{ID: "a", Tokens: []uint32{1}}, want: ErrBadRequest},
		{name: "empty prompt", req: Request{ID: "a", MaxTokens: 1}, want: ErrBadRequest},
		{name: "tokens and hashes", req: Request{ID: "a", Tokens: []uint32{1}, PromptTokens: 1, MaxTokens: 1}, want: ErrBadRequest},
		{name: "hash count", req: Request{ID: "a", PromptTokens: 64, Locals: locals, MaxTokens: 1}, want: ErrBadRequest},
		{name: "seqs mismatch", req: Request{ID: "a", PromptTokens: 128, Locals: locals, Seqs: []routing.SeqHash{1, 2}, MaxTokens: 1}, want: ErrBadRequest},
		{name: "beyond cache", cfg: Config{NumBlocks: 2, BlockSize: 4}, req: Request{ID: "a", Tokens: make([]uint32, 8), MaxTokens: 2}, want: ErrTooLong},
		{name: "beyond model len", cfg: Config{MaxModelLen: 10}, req: Request{ID: "a", Tokens: make([]uint32, 8), MaxTokens: 3}, want: ErrTooLong},
		{name: "fits exactly", cfg: Config{NumBlocks: 2, BlockSize: 4}, req: Request{ID: "a", Tokens: make([]uint32, 8), MaxTokens: 1}},
		{name: "given seqs", req: Request{ID: "a", PromptTokens: 128, Locals: locals, Seqs: routing.SeqHashes(nil, locals), MaxTokens: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEngine(t, tc.cfg)
			if err := e.Submit(tc.req, t0); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func TestSubmitOrderAndDuplicates(t *testing.T) {
	e := newTestEngine(t, Config{})
	req := hashed("a", 1, 100, 2, 64)
	if err := e.Submit(req, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := e.Submit(req, t0.Add(time.Second)); !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("duplicate: %v", err)
	}
	req.ID = "b"
	if err := e.Submit(req, t0); !errors.Is(err, ErrTimeBackwards) {
		t.Fatalf("backwards: %v", err)
	}
	e.Advance(t0.Add(time.Hour))
	req.ID = "a"
	if err := e.Submit(req, t0.Add(time.Hour)); err != nil {
		t.Fatalf("id reused after completion: %v", err)
	}
}

// TestLifecycleTiming follows one request: its first token comes at the end
// of its prefill iteration, each later token one decode iteration after the
// previous one.
func TestLifecycleTiming(t *testing.T) {
	e := newTestEngine(t, Config{})
	if err := e.Submit(hashed("a", 1, 1000, 4, 64), t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if next, ok := e.NextEventTime(); !ok || !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("next event %v %v, want the arrival", next, ok)
	}
	tm := e.cfg.Timing
	prefill := tm.IterationTime(Batch{PrefillTokens: 1000, AttentionPairs: ChunkPairs(0, 1000)})
	res := e.Advance(t0.Add(time.Hour))
	if len(res.Finished) != 1 || res.Iterations != 4 || res.TokensGenerated != 4 {
		t.Fatalf("result %+v", res)
	}
	c := res.Finished[0]
	if c.TTFT() != prefill || c.OutputTokens != 4 || c.PromptTokens != 1000 || c.PromptBlocks != 15 {
		t.Fatalf("completion %+v, want TTFT %v", c, prefill)
	}
	decode := tm.IterationTime(Batch{Decodes: 1, DecodeContext: 1001})
	if c.MaxITL < decode || c.MaxITL > decode+time.Microsecond || c.MeanITL() < decode {
		t.Fatalf("ITL max %v mean %v, want about %v", c.MaxITL, c.MeanITL(), decode)
	}
	if _, ok := e.NextEventTime(); ok {
		t.Fatal("engine not idle after completion")
	}
	if l := e.Load(); l.KVUsedBlocks != 0 || l.KVCachedBlocks != 15 {
		t.Fatalf("load after completion %+v", l)
	}
}

func TestPrefixHitSkipsPrefill(t *testing.T) {
	e := newTestEngine(t, Config{})
	first := hashed("a", 1, 6400, 1, 64)
	if err := e.Submit(first, t0); err != nil {
		t.Fatal(err)
	}
	cold := e.Advance(t0.Add(time.Hour)).Finished[0]
	again := first
	again.ID = "b"
	if err := e.Submit(again, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	res := e.Advance(t0.Add(2 * time.Hour))
	warm := res.Finished[0]
	// The whole prompt is cached but the last block is recomputed so that
	// one token has logits.
	if res.Admitted[0].HitBlocks != 99 || warm.HitBlocks != 99 || cold.HitBlocks != 0 {
		t.Fatalf("hits %+v / %+v", res.Admitted, cold)
	}
	if warm.TTFT() >= cold.TTFT()/10 {
		t.Fatalf("warm TTFT %v, cold %v", warm.TTFT(), cold.TTFT())
	}
	if len(res.Events) != 0 {
		t.Fatalf("a full hit stored %d events", len(res.Events))
	}
}

// TestTokensAndHashesAgree submits the same prompt as token ids and as
// precomputed hashes and expects the same events.
func TestTokensAndHashesAgree(t *testing.T) {
	toks := make([]uint32, 300)
	for i := range toks {
		toks[i] = uint32(i * 7)
	}
	locals, _ := routing.LocalHashes(nil, toks, 64, routing.HashSeed)
	byTokens := Request{ID: "a", Tokens: toks, MaxTokens: 2}
	byHashes := Request{ID: "a", PromptTokens: 300, Locals: locals, MaxTokens: 2}
	run := func(r Request) StepResult {
		e := newTestEngine(t, Config{})
		if err := e.Submit(r, t0); err != nil {
			t.Fatal(err)
		}
		return e.Advance(t0.Add(time.Minute))
	}
	a, b := run(byTokens), run(byHashes)
	if !reflect.DeepEqual(a, b) || len(a.Events) != 1 || len(a.Events[0].Blocks) != 4 {
		t.Fatalf("tokens %+v\nhashes %+v", a, b)
	}
}

// randomTrace draws a workload with shared prefixes from a seeded source.
func randomTrace(seed uint64, n, bs int) []timedReq {
	rng := rand.New(rand.NewPCG(seed, 1))
	reqs := make([]timedReq, 0, n)
	at := time.Duration(0)
	for i := range n {
		at += time.Duration(rng.ExpFloat64() * float64(200*time.Millisecond))
		prompt := 2000 + rng.IntN(30000)
		r := hashed(fmt.Sprint("r", i), i, prompt, 1+rng.IntN(300), bs)
		// Share a prefix with one of a few system prompts.
		shared := min(len(r.Locals), rng.IntN(200))
		for k := range shared {
			r.Locals[k] = routing.LocalHash(uint64(rng.IntN(4))<<40 | uint64(k))
		}
		reqs = append(reqs, timedReq{at: at, req: r})
	}
	return reqs
}

func TestDeterminism(t *testing.T) {
	run := func() []StepResult {
		e := newTestEngine(t, Config{NumBlocks: 2000})
		var out []StepResult
		if _, err := drive(e, randomTrace(42, 60, 64), func(r StepResult) error {
			out = append(out, r)
			if len(out)%32 != 0 {
				return nil
			}
			return checkInvariants(e)
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b := run(), run()
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same inputs gave different results")
	}
	var evicted, preempted, finished int
	for _, r := range a {
		finished += len(r.Finished)
		preempted += len(r.Preempted)
		for _, ev := range r.Events {
			evicted += len(ev.Removed)
		}
	}
	if finished != 60 || evicted == 0 || preempted == 0 {
		t.Fatalf("workload too gentle: %d finished, %d evicted, %d preempted", finished, evicted, preempted)
	}
}

func TestLoadReport(t *testing.T) {
	e := newTestEngine(t, Config{MaxNumBatchedTokens: 1000})
	for i, p := range []int{3000, 500} {
		if err := e.Submit(hashed(fmt.Sprint(i), i, p, 10, 64), t0); err != nil {
			t.Fatal(err)
		}
	}
	l := e.Load()
	if l.Waiting != 2 || l.Running != 0 || l.ActivePrefillTokens != 3500 || l.KVUsedBlocks != 0 || l.KVTotalBlocks != DefaultNumBlocks {
		t.Fatalf("before start %+v", l)
	}
	e.Advance(t0)
	l = e.Load()
	// The first iteration schedules 1000 tokens of the first request.
	if l.Waiting != 1 || l.Running != 1 || l.ActivePrefillTokens != 3500 || l.KVUsedBlocks != 16 || l.ActiveDecodeBlocks != 16 {
		t.Fatalf("first iteration %+v", l)
	}
	next, _ := e.NextEventTime()
	e.Advance(next)
	if l = e.Load(); l.ActivePrefillTokens != 2500 || l.Running != 1 {
		t.Fatalf("second iteration %+v", l)
	}
	want := routing.Load{PrefillTokens: l.ActivePrefillTokens, DecodeBlocks: l.ActiveDecodeBlocks, ActiveRequests: 2}
	if l.Routing() != want {
		t.Fatalf("routing load %+v, want %+v", l.Routing(), want)
	}
}

// A waiting request's reported prefill is what admission would compute:
// its prompt minus the prefix the cache holds now, as the router books it.
func TestLoadReportSkipsTheCachedPrefixOfWaitingRequests(t *testing.T) {
	e := newTestEngine(t, Config{MaxNumBatchedTokens: 1000})
	if err := e.Submit(hashed("warm", 7, 640, 1, 64), t0); err != nil {
		t.Fatal(err)
	}
	for at, busy := e.NextEventTime(); busy; at, busy = e.NextEventTime() {
		e.Advance(at)
	}
	// Two waiting requests share the first 640 tokens with the finished
	// one; a long running prefill keeps them waiting.
	now := t0.Add(time.Minute)
	for i, p := range []int{4000, 1280, 1000} {
		if err := e.Submit(hashed(fmt.Sprint(i), 7, p, 1, 64), now); err != nil {
			t.Fatal(err)
		}
	}
	e.Advance(now)
	l := e.Load()
	// The first was admitted with its 640 cached tokens skipped; its
	// first chunk is in flight, so all the rest is still to compute.
	want := int64((4000 - 640) + (1280 - 640) + (1000 - 640))
	if l.Waiting != 2 || l.ActivePrefillTokens != want {
		t.Fatalf("load %+v, want 2 waiting and %d prefill tokens", l, want)
	}
}

func TestResetCache(t *testing.T) {
	e := newTestEngine(t, Config{})
	if err := e.Submit(hashed("a", 1, 640, 3, 64), t0); err != nil {
		t.Fatal(err)
	}
	e.Advance(t0)
	if err := e.ResetCache(); !errors.Is(err, ErrBusy) {
		t.Fatalf("reset while running: %v", err)
	}
	res := e.Advance(t0.Add(time.Hour))
	last := res.Events[len(res.Events)-1].ID
	if err := e.ResetCache(); err != nil {
		t.Fatal(err)
	}
	res = e.Advance(t0.Add(time.Hour))
	if len(res.Events) != 1 || res.Events[0].Kind != routing.EventCleared || res.Events[0].ID != last+1 {
		t.Fatalf("events after reset %+v", res.Events)
	}
	if l := e.Load(); l.KVCachedBlocks != 0 || len(e.Dump().Events) != 0 {
		t.Fatalf("cache not empty: %+v", l)
	}
}

func TestInfo(t *testing.T) {
	e := newTestEngine(t, Config{NumBlocks: 100})
	want := routing.WorkerInfo{Worker: testWorker, Model: DefaultModel, BlockSize: 64, TotalBlocks: 100, MaxBatchedTokens: 8192}
	if e.Info() != want {
		t.Fatalf("info %+v", e.Info())
	}
}

// TestAdvanceInOneCall checks that one Advance far ahead gives the same
// completions as stepping event by event.
func TestAdvanceInOneCall(t *testing.T) {
	reqs := randomTrace(7, 20, 64)
	stepwise := newTestEngine(t, Config{})
	var want []Completion
	if _, err := drive(stepwise, reqs, func(r StepResult) error {
		want = append(want, r.Finished...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	bulk := newTestEngine(t, Config{})
	for _, r := range reqs {
		if err := bulk.Submit(r.req, t0.Add(r.at)); err != nil {
			t.Fatal(err)
		}
	}
	got := bulk.Advance(t0.Add(24 * time.Hour)).Finished
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("bulk advance differs: %d vs %d completions", len(got), len(want))
	}
}
