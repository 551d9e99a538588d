package mocker

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// hashed returns a precomputed-hash request of prompt tokens whose blocks
// are distinct per family.
func hashed(id string, family, prompt, maxTokens, bs int) Request {
	locals := make([]routing.LocalHash, prompt/bs)
	for i := range locals {
		locals[i] = routing.LocalHash(family<<32 | (i + 1))
	}
	return Request{ID: id, PromptTokens: prompt, Locals: locals, MaxTokens: maxTokens}
}

// chunks advances e event by event and records each iteration's scheduled
// token counts per request id.
func chunks(t *testing.T, e *Engine) []map[string]int {
	t.Helper()
	var out []map[string]int
	for {
		if e.busy {
			m := map[string]int{}
			for _, w := range e.cur.work {
				m[w.s.id] = w.n
			}
			out = append(out, m)
		}
		next, ok := e.NextEventTime()
		if !ok {
			return out
		}
		e.Advance(next)
		if err := checkInvariants(e); err != nil {
			t.Fatal(err)
		}
	}
}

func TestChunkedPrefill(t *testing.T) {
	e, err := New(Config{}, testWorker)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Submit(hashed("long", 1, 20000, 3, 64), t0); err != nil {
		t.Fatal(err)
	}
	e.Advance(t0)
	got := chunks(t, e)
	want := []int{8192, 8192, 3616, 1, 1}
	if len(got) != len(want) {
		t.Fatalf("%d iterations, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i]["long"] != w {
			t.Fatalf("iteration %d scheduled %d tokens, want %d", i, got[i]["long"], w)
		}
	}
}

func TestDecodesShareBudgetWithPrefill(t *testing.T) {
	e, err := New(Config{MaxNumBatchedTokens: 100, BlockSize: 4}, testWorker)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := e.Submit(hashed(fmt.Sprint("d", i), i, 8, 20, 4), t0); err != nil {
			t.Fatal(err)
		}
	}
	e.Advance(t0)
	if err := e.Submit(hashed("long", 9, 400, 1, 4), t0.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	done, mixed := 0, 0
	for _, it := range chunks(t, e) {
		n, ok := it["long"]
		if !ok {
			continue
		}
		done += n
		if it["d0"] == 1 && done < 400 {
			mixed++
			if n != 100-(len(it)-1) {
				t.Fatalf("prefill chunk %d beside %d decodes, want the rest of 100", n, len(it)-1)
			}
		}
	}
	if done != 400 || mixed == 0 {
		t.Fatalf("prefilled %d tokens, %d chunks beside decodes", done, mixed)
	}
}

func TestMaxNumSeqs(t *testing.T) {
	e, err := New(Config{MaxNumSeqs: 3, BlockSize: 4}, testWorker)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := e.Submit(hashed(fmt.Sprint(i), i, 8, 4, 4), t0); err != nil {
			t.Fatal(err)
		}
	}
	res := e.Advance(t0)
	if len(res.Admitted) != 3 || len(e.running) != 3 {
		t.Fatalf("admitted %d, running %d; want 3", len(res.Admitted), len(e.running))
	}
	for _, it := range chunks(t, e) {
		if len(it) > 3 {
			t.Fatalf("iteration with %d requests", len(it))
		}
	}
}

// TestFCFSHeadOfLine checks that a request that does not fit blocks the
// queue: a later small request is not admitted before it.
func TestFCFSHeadOfLine(t *testing.T) {
	e, err := New(Config{NumBlocks: 10, BlockSize: 4}, testWorker)
	if err != nil {
		t.Fatal(err)
	}
	submit := func(r Request, at time.Duration) {
		if err := e.Submit(r, t0.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	submit(hashed("big", 1, 32, 5, 4), 0)
	submit(hashed("wide", 2, 16, 1, 4), time.Millisecond)
	submit(hashed("small", 3, 3, 1, 4), time.Millisecond)
	var order []string
	for {
		next, ok := e.NextEventTime()
		if !ok {
			break
		}
		for _, a := range e.Advance(next).Admitted {
			order = append(order, a.ID)
		}
	}
	if fmt.Sprint(order) != "[big wide small]" {
		t.Fatalf("admission order %v", order)
	}
}

// TestPreemptionRecompute fills a small cache with two long generations so
// that the later one is preempted, then checks it is readmitted with its
// cached prompt and still produces every token.
func TestPreemptionRecompute(t *testing.T) {
	e, err := New(Config{NumBlocks: 12, BlockSize: 4}, testWorker)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"first", "second"} {
		if err := e.Submit(hashed(id, i, 12, 20, 4), t0); err != nil {
			t.Fatal(err)
		}
	}
	var preempted, readmitted int
	done := map[string]Completion{}
	for {
		next, ok := e.NextEventTime()
		if !ok {
			break
		}
		res := e.Advance(next)
		if err := checkInvariants(e); err != nil {
			t.Fatal(err)
		}
		for _, p := range res.Preempted {
			if p.ID != "second" {
				t.Fatalf("preempted %s, want the later request", p.ID)
			}
			preempted++
		}
		for _, a := range res.Admitted {
			if a.Readmission {
				readmitted++
				if a.HitBlocks != 3 {
					t.Fatalf("readmitted with %d hit blocks, want the 3 prompt blocks", a.HitBlocks)
				}
			}
		}
		for _, c := range res.Finished {
			done[c.ID] = c
		}
	}
	if preempted == 0 || readmitted != preempted {
		t.Fatalf("preempted %d, readmitted %d", preempted, readmitted)
	}
	for _, id := range []string{"first", "second"} {
		if c := done[id]; c.OutputTokens != 20 {
			t.Fatalf("%s: %+v", id, c)
		}
	}
	if done["second"].Preemptions != preempted {
		t.Fatalf("completion counts %d preemptions, saw %d", done["second"].Preemptions, preempted)
	}
}
