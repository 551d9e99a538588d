package load

import (
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// t0 is the fixed start of every test clock.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

var (
	w1   = routing.Worker{ID: 1}
	w2   = routing.Worker{ID: 2}
	w1r1 = routing.Worker{ID: 1, Rank: 1}
)

// chain returns the sequence hashes of a prompt whose blocks have the given
// local hashes, so tests can build prompts that share prefixes.
func chain(locals ...uint64) []routing.SeqHash {
	out := make([]routing.SeqHash, len(locals))
	var parent routing.SeqHash
	for i, l := range locals {
		if i == 0 {
			out[i] = routing.SeqHash(l)
		} else {
			out[i] = routing.Chain(parent, routing.LocalHash(l))
		}
		parent = out[i]
	}
	return out
}

// newTracker builds a tracker or fails the test.
func newTracker(t testing.TB, cfg Config) *Tracker {
	t.Helper()
	tr, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tr
}

// mustAdd books a request or fails the test.
func mustAdd(t testing.TB, tr *Tracker, r Request, now time.Time) {
	t.Helper()
	if err := tr.Add(r, now); err != nil {
		t.Fatalf("Add(%q): %v", r.ID, err)
	}
}

// fataler is the part of testing.TB and *rapid.T the assertions use.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// assertIdle checks that the tracker holds no request and no worker state.
func assertIdle(t fataler, tr *Tracker) {
	t.Helper()
	tr.mu.RLock()
	defer tr.mu.RUnlock()
	if len(tr.requests) != 0 || len(tr.workers) != 0 {
		t.Fatalf("tracker not idle: %d requests, %d workers", len(tr.requests), len(tr.workers))
	}
}
