package sim

import (
	"context"
	"testing"

	"github.com/kvrouter/kvrouter/traces"
)

// TestOutputTrackingChargesDecode replays one long generation on one
// engine and checks what the router's tracker books for it as the engine
// generates: with output tracking the booking grows with the output, one
// block per block of tokens, and it is freed at the end; without, it stays
// at the prompt.
func TestOutputTrackingChargesDecode(t *testing.T) {
	for _, track := range []bool{false, true} {
		cfg := Config{Engines: 1, TrackOutputBlocks: track}.withDefaults()
		w, err := NewWorkload(cfg.BlockSize)
		if err != nil {
			t.Fatal(err)
		}
		prompts := w.Prompts([]traces.Request{{InputTokens: 512, OutputTokens: 640, HashIDs: []uint64{1}}})
		rp, err := newReplay(prompts, "kv", cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := rp.admit(0); err != nil {
			t.Fatal(err)
		}
		worker, peak := rp.engines[0].Info().Worker, int64(0)
		for {
			_, at, busy := rp.nextEngine()
			if !busy {
				break
			}
			if err := rp.step(0, at); err != nil {
				t.Fatal(err)
			}
			peak = max(peak, rp.router.core.Active(cfg.BlockSize, worker).DecodeBlocks)
		}
		// 8 prompt blocks; 640 output tokens fill 10 more.
		want := map[bool]int64{false: 8, true: 18}[track]
		if peak != want {
			t.Fatalf("tracking %v: the booking peaked at %d decode blocks, want %d", track, peak, want)
		}
		if n := rp.router.core.Booked(); n != 0 || rp.done != 1 {
			t.Fatalf("tracking %v: %d bookings left, %d done", track, n, rp.done)
		}
	}
}

// TestOutputTrackingDisaggregated: a disaggregated replay reports the
// decode hops' tokens to their bookings and ends with nothing booked.
func TestOutputTrackingDisaggregated(t *testing.T) {
	cfg := Config{Engines: 4, PrefillEngines: 2, TrackOutputBlocks: true, OutputHints: true}.withDefaults()
	w, err := NewWorkload(cfg.BlockSize)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := newReplay(w.Prompts(bundled(t, 200)), "kv", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rp.done != 200 || len(rp.router.pairs) != 0 || len(rp.router.generated) != 0 {
		t.Fatalf("%d done, %d pair bookings and %d token counts left", rp.done, len(rp.router.pairs), len(rp.router.generated))
	}
}
