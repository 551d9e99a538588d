package mocker

import (
	"testing"
	"time"
)

// Cancel removes a request wherever it is: waiting, running between
// iterations, or running in the iteration in flight (then at its end). A
// cancelled request never finishes, releases its blocks, and leaves the
// engine's invariants intact; the others run to completion.
func TestCancel(t *testing.T) {
	tests := []struct {
		name string
		// advance is how far the engine runs before the cancellation.
		advance time.Duration
		victim  string
	}{
		{"waiting", 0, "c"},
		{"running, iteration in flight", time.Millisecond, "a"},
		{"running, between iterations", 0, "a"},
		{"unknown", 0, "zz"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(Config{BlockSize: 4, NumBlocks: 64, MaxNumBatchedTokens: 64, MaxNumSeqs: 2}, testWorker)
			if err != nil {
				t.Fatal(err)
			}
			for i, id := range []string{"a", "b", "c"} {
				tokens := make([]uint32, 16)
				for j := range tokens {
					tokens[j] = uint32(100*i + j)
				}
				if err := e.Submit(Request{ID: id, Tokens: tokens, MaxTokens: 50}, t0); err != nil {
					t.Fatal(err)
				}
			}
			now := t0
			if tc.name == "running, between iterations" {
				// Run the first iteration to its end without starting the next.
				e.Advance(now)
				next, _ := e.NextEventTime()
				now = next
				e.complete()
			} else {
				now = now.Add(tc.advance)
				e.Advance(now)
			}
			canceled := e.Cancel(tc.victim)
			if canceled != (tc.victim != "zz") {
				t.Fatalf("Cancel = %v", canceled)
			}
			if e.Cancel(tc.victim) {
				t.Fatal("a second Cancel found the request again")
			}
			finished := map[string]bool{}
			for {
				next, ok := e.NextEventTime()
				if !ok {
					break
				}
				now = next
				for _, c := range e.Advance(now).Finished {
					finished[c.ID] = true
				}
				if err := checkInvariants(e); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range []string{"a", "b", "c"} {
				if finished[id] == (id == tc.victim) {
					t.Fatalf("finished %v (cancelled %s)", finished, tc.victim)
				}
			}
			if l := e.Load(); l.Running != 0 || l.Waiting != 0 || l.KVUsedBlocks != 0 {
				t.Fatalf("load after the run %+v", l)
			}
		})
	}
}
