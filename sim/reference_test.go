package sim

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/traces"
)

func TestPooledLRU(t *testing.T) {
	w, _ := NewWorkload(512)
	reqs := []traces.Request{
		{InputTokens: 1025, HashIDs: []uint64{1, 2, 3}},
		{InputTokens: 1025, HashIDs: []uint64{4, 5, 6}},
		{InputTokens: 1025, HashIDs: []uint64{1, 2, 3}},
	}
	ps := w.Prompts(reqs)
	tests := []struct {
		name     string
		capacity int
		want     []int32
	}{
		{"everything fits", 4, []int32{0, 0, 2}},
		// Two blocks: the second prompt evicts the first.
		{"one prompt fits", 2, []int32{0, 0, 0}},
		// Three blocks: the second prompt evicts the first's deepest
		// block first, so its root survives.
		{"tail evicted first", 3, []int32{0, 0, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ratio, per := PooledLRU(ps, tc.capacity, 512)
			var hits int32
			for i := range per {
				hits += per[i]
				if per[i] != tc.want[i] {
					t.Fatalf("hits %v, want %v", per, tc.want)
				}
			}
			if want := float64(hits) / 6; ratio != want { // two blocks a prompt
				t.Fatalf("ratio %v, want %v", ratio, want)
			}
		})
	}
}

// The clairvoyant placement keeps the blocks a later prompt needs: with room
// for one prompt's blocks on each of two engines, it serves the repeated
// prompt from cache where LRU on one pooled cache of the same size would not.
func TestOracleKeepsWhatComesBack(t *testing.T) {
	w, _ := NewWorkload(512)
	reqs := []traces.Request{
		{InputTokens: 1025, HashIDs: []uint64{1, 2, 3}},
		{InputTokens: 1025, HashIDs: []uint64{4, 5, 6}},
		{InputTokens: 1025, HashIDs: []uint64{7, 8, 9}},
		{InputTokens: 1025, HashIDs: []uint64{1, 2, 3}},
	}
	ps := w.Prompts(reqs)
	if got, want := Oracle(ps, 2, 2, 512), 2.0/8; got != want {
		t.Fatalf("oracle %v, want %v", got, want)
	}
	if got, _ := PooledLRU(ps, 4, 512); got != 0 {
		t.Fatalf("pooled LRU %v, want 0", got)
	}
}

// Every reference and share is in the JSON, the losses add up, and the
// recommended policy is marked.
func TestCompareReportsReferences(t *testing.T) {
	rs, err := Compare(context.Background(), bundled(t, 300), []string{Recommended, "round-robin"}, Config{Engines: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Recommended != (r.Policy == Recommended) {
			t.Errorf("%s: recommended %v", r.Policy, r.Recommended)
		}
		if !(r.PooledHitRatio > 0 && r.PooledHitRatio <= r.BoundHitRatio && r.OracleHitRatio <= r.BoundHitRatio) {
			t.Errorf("%s: references %v %v %v", r.Policy, r.BoundHitRatio, r.PooledHitRatio, r.OracleHitRatio)
		}
		l := r.Losses
		if l.Pooled-l.Hit != l.NotComputed+l.Evicted+l.Override+l.Queued-l.Beyond {
			t.Errorf("%s: losses do not add up: %+v", r.Policy, l)
		}
		if len(r.Detail.Decisions) != 300 || len(r.Detail.Timeline) == 0 {
			t.Errorf("%s: detail of %d decisions, %d samples", r.Policy, len(r.Detail.Decisions), len(r.Detail.Timeline))
		}
	}
	b, _ := json.Marshal(rs)
	for _, key := range []string{`"pooled_hit_ratio"`, `"oracle_hit_ratio"`, `"ttft_p99_ms"`, `"bound_hit_ratio"`, `"recommended":true`, `"hit_of_pooled"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
}
