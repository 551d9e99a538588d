package mocker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"pgregory.net/rapid"
)

// genWorkload draws requests whose prompts share prefixes from a few
// families, so that the cache sees hits, duplicates and evictions.
func genWorkload(t *rapid.T, bs int) []timedReq {
	n := rapid.IntRange(1, 25).Draw(t, "requests")
	reqs := make([]timedReq, 0, n)
	at := time.Duration(0)
	for i := range n {
		at += time.Duration(rapid.IntRange(0, 30).Draw(t, "gap_ms")) * time.Millisecond
		family := uint32(rapid.IntRange(0, 2).Draw(t, "family"))
		shared := rapid.IntRange(0, 6).Draw(t, "shared_blocks") * bs
		tail := rapid.IntRange(0, 3*bs).Draw(t, "tail_tokens")
		tokens := make([]uint32, 0, shared+tail+1)
		for k := range shared {
			tokens = append(tokens, family*1000+uint32(k))
		}
		for k := range tail + 1 {
			tokens = append(tokens, uint32(100000+i*100+k))
		}
		reqs = append(reqs, timedReq{at: at, req: Request{
			ID: fmt.Sprint("r", i), Tokens: tokens, MaxTokens: rapid.IntRange(1, 12).Draw(t, "max_tokens"),
		}})
	}
	return reqs
}

func genConfig(t *rapid.T) Config {
	return Config{
		BlockSize:           4,
		NumBlocks:           rapid.IntRange(10, 40).Draw(t, "blocks"),
		MaxNumBatchedTokens: rapid.IntRange(1, 40).Draw(t, "budget"),
		MaxNumSeqs:          rapid.IntRange(1, 6).Draw(t, "max_seqs"),
		EventRingSize:       8,
	}
}

// TestEventsReplayMatchesCache replays every emitted event into a model and
// checks after each step that the model equals the cache, that ids are
// contiguous, that the accounting invariants hold (so no referenced block
// was evicted) and that a dump rebuilds the same state.
func TestEventsReplayMatchesCache(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e, err := New(genConfig(t), routing.Worker{ID: 7, Rank: 1})
		if err != nil {
			t.Fatal(err)
		}
		m := newKVModel()
		resetAt := rapid.IntRange(0, 40).Draw(t, "reset_step")
		step := 0
		_, err = drive(e, genWorkload(t, 4), func(res StepResult) error {
			step++
			if step == resetAt && len(e.running) == 0 {
				if err := e.ResetCache(); err != nil {
					return err
				}
				// The Cleared event comes with the next Advance; one at the
				// current time only drains it.
				res.Events = append(res.Events, e.Advance(e.clock).Events...)
			}
			return checkStep(e, m, res)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := checkStep(e, m, e.Advance(t0.Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
		if err := checkDump(e, m); err != nil {
			t.Fatal(err)
		}
	})
}

func checkStep(e *Engine, m *kvModel, res StepResult) error {
	for _, ev := range res.Events {
		if ev.Worker != e.worker || ev.Tier != routing.TierDevice {
			return fmt.Errorf("event %d stamped %v/%v", ev.ID, ev.Worker, ev.Tier)
		}
	}
	if err := m.apply(res.Events); err != nil {
		return err
	}
	if err := checkInvariants(e); err != nil {
		return err
	}
	return m.matches(e)
}

// checkDump rebuilds the cache from a dump and compares it with the model
// fed by live events.
func checkDump(e *Engine, live *kvModel) error {
	snap := e.Dump()
	if snap.LastEventID != live.lastID {
		return fmt.Errorf("dump at id %d, live at %d", snap.LastEventID, live.lastID)
	}
	m := newKVModel()
	for _, ev := range snap.Events {
		if err := m.applyOne(ev); err != nil {
			return fmt.Errorf("dump: %w", err)
		}
	}
	return m.matches(e)
}

func TestEventsSince(t *testing.T) {
	e, err := New(Config{BlockSize: 4, NumBlocks: 6, EventRingSize: 3}, routing.Worker{ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Distinct 8-token prompts: each stores 2 blocks and, once the cache is
	// full, evicts, so events accumulate beyond the ring.
	var all []routing.Event
	for i := range 6 {
		toks := []uint32{uint32(i), 1, 2, 3, 4, 5, 6, uint32(i)}
		if err := e.Submit(Request{ID: fmt.Sprint(i), Tokens: toks, MaxTokens: 1}, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
		all = append(all, e.Advance(t0.Add(time.Duration(i)*time.Hour+time.Minute)).Events...)
	}
	last := e.LastEventID()
	if last != uint64(len(all)) || last < 5 {
		t.Fatalf("last id %d with %d events", last, len(all))
	}
	tests := []struct {
		name    string
		after   uint64
		want    int
		wantErr error
	}{
		{name: "up to date", after: last, want: 0},
		{name: "one behind", after: last - 1, want: 1},
		{name: "whole ring", after: last - 3, want: 3},
		{name: "beyond ring", after: last - 4, wantErr: ErrEventsGone},
		{name: "from start", after: 0, wantErr: ErrEventsGone},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.EventsSince(tc.after)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if len(got) != tc.want {
				t.Fatalf("%d events, want %d", len(got), tc.want)
			}
			for i, ev := range got {
				if ev.ID != tc.after+uint64(i)+1 || ev.Kind != all[ev.ID-1].Kind {
					t.Fatalf("event %d has id %d kind %v", i, ev.ID, ev.Kind)
				}
			}
		})
	}
}

func TestStoredEventShape(t *testing.T) {
	e, err := New(Config{BlockSize: 4}, routing.Worker{ID: 3, Rank: 2})
	if err != nil {
		t.Fatal(err)
	}
	toks := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if err := e.Submit(Request{ID: "a", Tokens: toks, MaxTokens: 1}, t0); err != nil {
		t.Fatal(err)
	}
	evs := e.Advance(t0.Add(time.Second)).Events
	if len(evs) != 1 || evs[0].Kind != routing.EventStored || evs[0].HasParent || evs[0].ID != 1 {
		t.Fatalf("events %+v", evs)
	}
	locals, _ := routing.LocalHashes(nil, toks, 4, routing.HashSeed)
	seqs := routing.SeqHashes(nil, locals)
	want := []routing.StoredBlock{{Engine: EngineHash(seqs[0]), Local: locals[0]}, {Engine: EngineHash(seqs[1]), Local: locals[1]}}
	if fmt.Sprint(evs[0].Blocks) != fmt.Sprint(want) {
		t.Fatalf("blocks %v, want %v", evs[0].Blocks, want)
	}
	for _, b := range evs[0].Blocks {
		if uint64(b.Engine) == uint64(seqs[0]) || uint64(b.Engine) == uint64(seqs[1]) {
			t.Fatal("engine hash equals router hash")
		}
	}
	// A longer prompt with the same first two blocks stores only its third
	// block, parented to the second.
	toks2 := append(append([]uint32{}, toks[:8]...), 20, 21, 22, 23)
	if err := e.Submit(Request{ID: "b", Tokens: toks2, MaxTokens: 1}, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	res := e.Advance(t0.Add(2 * time.Second))
	if len(res.Admitted) != 1 || res.Admitted[0].HitBlocks != 2 {
		t.Fatalf("admitted %+v", res.Admitted)
	}
	if len(res.Events) != 1 || !res.Events[0].HasParent || res.Events[0].Parent != EngineHash(seqs[1]) || len(res.Events[0].Blocks) != 1 {
		t.Fatalf("events %+v", res.Events)
	}
}

// TestConcurrentIdenticalPrompts admits two identical prompts in the same
// iteration: both compute the blocks, one Stored event is published and the
// second request adopts the cached copies.
func TestConcurrentIdenticalPrompts(t *testing.T) {
	e, err := New(Config{BlockSize: 4, NumBlocks: 20}, testWorker)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if err := e.Submit(hashed(id, 1, 10, 3, 4), t0); err != nil {
			t.Fatal(err)
		}
	}
	e.Advance(t0)
	if e.Load().KVUsedBlocks != 6 {
		t.Fatalf("two private prefills hold %d blocks, want 6", e.Load().KVUsedBlocks)
	}
	next, _ := e.NextEventTime()
	res := e.Advance(next)
	if len(res.Events) != 1 || len(res.Events[0].Blocks) != 2 {
		t.Fatalf("events %+v", res.Events)
	}
	if err := checkInvariants(e); err != nil {
		t.Fatal(err)
	}
	// Shared prompt blocks count once, the partial tails twice.
	if l := e.Load(); l.KVUsedBlocks != 4 || l.ActiveDecodeBlocks != 6 {
		t.Fatalf("after adoption %+v", l)
	}
}
