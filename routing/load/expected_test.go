package load

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// TestExpectedOutput: an expected output length books its blocks at Add
// under output-block tracking; their weight decays as generated tokens
// approach the expectation (OutputDecay), tokens beyond it grow the
// blocks; Free releases all of it; Potential projects it in full.
func TestExpectedOutput(t *testing.T) {
	// 32 prompt tokens (2 blocks) expecting 40 output tokens (3 blocks),
	// then 20, 20 and 9 tokens: half, all, and past the expectation (81
	// tokens, 6 blocks, 4 of them output).
	for _, tc := range []struct {
		name  string
		decay float64
		want  []int64 // decode blocks after Add, then after each output
	}{
		{"reference decay", 1, []int64{5, 4, 2, 2}}, // 3 × 0.5 = 1.5 rounds to 2
		{"no decay", 0, []int64{5, 5, 5, 6}},        // full weight until Free
		{"twice as fast", 2, []int64{5, 2, 2, 2}},   // zero at half the expectation
		{"half as fast", 0.5, []int64{5, 4, 4, 4}},  // 3 × 0.75 = 2.25; 3 × 0.5; 4 × 0.3875
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig(16)
			cfg.TrackOutputBlocks, cfg.AssumeKVReuse, cfg.OutputDecay = true, false, tc.decay
			tr := newTracker(t, cfg)
			mustAdd(t, tr, Request{ID: "a", Worker: w1, ISLTokens: 32, OutputTokens: 40}, t0)
			if got := tr.Active(w1); got != (routing.Load{PrefillTokens: 32, DecodeBlocks: tc.want[0], ActiveRequests: 1}) {
				t.Fatalf("after Add: %+v", got)
			}
			for i, n := range []int{20, 20, 9} {
				if err := tr.AddOutputTokens("a", n); err != nil {
					t.Fatal(err)
				}
				if got := tr.Active(w1); got != (routing.Load{DecodeBlocks: tc.want[i+1], ActiveRequests: 1}) {
					t.Fatalf("after output %d: %+v, want %d decode blocks", i, got, tc.want[i+1])
				}
			}
			got, err := tr.Potential(nil, Query{ISLTokens: 32, OutputTokens: 40}, []routing.Match{{Worker: w2}})
			if err != nil || got[0].DecodeBlocks != 5 {
				t.Fatalf("Potential = %+v, %v; want 5 decode blocks", got, err)
			}
			tr.Free("a")
			assertIdle(t, tr)
		})
	}
	tr := newTracker(t, DefaultConfig(16))
	if err := tr.Add(Request{ID: "b", Worker: w1, ISLTokens: 32, OutputTokens: -1}, t0); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("negative expected output: %v", err)
	}
}

// TestOutputDecayCharged: a long-decoding request is charged its decode
// load while its tokens come, and nothing once it is freed; without an
// expected length its output weighs in full, however long it grows.
func TestOutputDecayCharged(t *testing.T) {
	cfg := DefaultConfig(16)
	cfg.TrackOutputBlocks = true
	tr := newTracker(t, cfg)
	mustAdd(t, tr, Request{ID: "long", Worker: w1, Hashes: chain(1), ISLTokens: 16}, t0)
	for i := range 10 {
		if err := tr.AddOutputTokens("long", 16); err != nil {
			t.Fatal(err)
		}
		if got := tr.Active(w1).DecodeBlocks; got != int64(i+2) {
			t.Fatalf("after %d output blocks: %d decode blocks, want %d", i+1, got, i+2)
		}
	}
	tr.Free("long")
	assertIdle(t, tr)
}

// TestOutputDecayConfig: a negative or infinite decay is refused, naming
// the key.
func TestOutputDecayConfig(t *testing.T) {
	for _, v := range []float64{-0.5, math.Inf(1)} {
		cfg := DefaultConfig(16)
		cfg.OutputDecay = v
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "output_block_decay") {
			t.Errorf("OutputDecay %v: %v, want ErrInvalidConfig naming output_block_decay", v, err)
		}
	}
}
