package load

import (
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// TestExpectedOutput: an expected output length books its blocks at Add
// under output-block tracking; generated tokens grow the booking only
// past the expectation; Free releases all of it; Potential projects it.
func TestExpectedOutput(t *testing.T) {
	cfg := DefaultConfig(16)
	cfg.TrackOutputBlocks = true
	cfg.AssumeKVReuse = false
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// 32 prompt tokens (2 blocks) expecting 40 output tokens (3 blocks).
	run(t, tr, []step{
		{op: "add", req: Request{ID: "a", Worker: w1, ISLTokens: 32, OutputTokens: 40},
			want: map[routing.Worker]routing.Load{w1: {PrefillTokens: 32, DecodeBlocks: 5, ActiveRequests: 1}}},
		{op: "output", id: "a", n: 40,
			want: map[routing.Worker]routing.Load{w1: {DecodeBlocks: 5, ActiveRequests: 1}}},
		{op: "output", id: "a", n: 9, // 81 tokens: a sixth block
			want: map[routing.Worker]routing.Load{w1: {DecodeBlocks: 6, ActiveRequests: 1}}},
		{op: "free", id: "a", wantN: 1, want: map[routing.Worker]routing.Load{w1: {}}},
		{op: "add", req: Request{ID: "b", Worker: w1, ISLTokens: 32, OutputTokens: -1}, wantErr: ErrInvalidRequest},
	})
	got, err := tr.Potential(nil, Query{ISLTokens: 32, OutputTokens: 40}, []routing.Match{{Worker: w1}})
	if err != nil || got[0].DecodeBlocks != 5 {
		t.Fatalf("Potential = %+v, %v; want 5 decode blocks", got, err)
	}
}
