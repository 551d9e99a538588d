package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// TestOutputTrackingChangesTheDecision: engine 1 runs a long generation L
// (a one-block prompt streaming 64 tokens, 16 blocks of output), engine
// 2 a request S with a four-block prompt that generates nothing yet.
// Without output tracking engine 1 looks lighter (one block against
// four) and a new request goes there; with it, engine 1 is charged L's
// output and the request goes to engine 2. Once L's tokens stop (Done),
// engine 1 is light again. The same holds for kv, kv-ttft and
// least-loaded (whose tie on active requests the decode load breaks).
func TestOutputTrackingChangesTheDecision(t *testing.T) {
	for _, name := range []string{NameKV, NameKVTTFT, NameLeastLoaded} {
		for _, tc := range []struct {
			track bool
			want  routing.WorkerID
		}{{false, 1}, {true, 2}} {
			t.Run(fmt.Sprintf("%s/tracking=%v", name, tc.track), func(t *testing.T) {
				rg := newRig(t, DeciderConfig{Policy: name, Options: DefaultOptions(nil),
					Tracking: Tracking{OutputBlocks: tc.track}}, 2, 1000)
				_, long := rg.route("L", prompt(1, 1), 1, 0)
				_, short := rg.route("S", prompt(2, 4), 2, 0)
				long.FirstToken(context.Background())
				short.FirstToken(context.Background())
				changed := 0
				for range 64 {
					if long.OutputTokens(1) {
						changed++
					}
				}
				if want := map[bool]int{false: 0, true: 16}[tc.track]; changed != want {
					t.Fatalf("the tracker was told of output %d times, want %d (once per block)", changed, want)
				}
				if w, b := rg.route("N", prompt(3, 2), 0, 0); w.ID != tc.want {
					t.Fatalf("new request went to engine %d, want %d", w.ID, tc.want)
				} else {
					b.Done(context.Background(), Succeeded)
				}
				long.Done(context.Background(), Succeeded)
				if w, b := rg.route("N2", prompt(4, 2), 0, 0); w.ID != 1 {
					t.Fatalf("after L ended, a new request went to engine %d, want 1", w.ID)
				} else {
					b.Done(context.Background(), Succeeded)
				}
				short.Done(context.Background(), Succeeded)
			})
		}
	}
}

// TestExpectedOutputIsChargedAtOnce: with an expected output length (the
// osl hint) the output is charged from the routing, before any token,
// and decays to nothing as the tokens reach it.
func TestExpectedOutputIsChargedAtOnce(t *testing.T) {
	rg := newRig(t, DeciderConfig{Tracking: Tracking{OutputBlocks: true}}, 2, 1000)
	_, long := rg.route("L", prompt(1, 1), 1, 64)
	if got := rg.d.Active(rigBlockSize, long.Worker()).DecodeBlocks; got != 17 {
		t.Fatalf("at routing engine 1 holds %d decode blocks, want 17 (1 prompt, 16 expected)", got)
	}
	long.FirstToken(context.Background())
	for range 32 {
		long.OutputTokens(1)
	}
	// The tracker hears at block boundaries: last at the 29th token
	// (sequence 33 tokens, block 9), so 16 × (1 - 29/64) = 8.75 → 9.
	if got := rg.d.Active(rigBlockSize, long.Worker()).DecodeBlocks; got != 10 {
		t.Fatalf("halfway engine 1 holds %d decode blocks, want 10 (1 prompt, 16 at weight 35/64)", got)
	}
	// The first boundary past the expected length is the 65th token.
	for range 33 {
		long.OutputTokens(1)
	}
	if got := rg.d.Active(rigBlockSize, long.Worker()).DecodeBlocks; got != 1 {
		t.Fatalf("past the expected length engine 1 holds %d decode blocks, want 1 (the prompt)", got)
	}
	long.Done(context.Background(), Succeeded)
	if got := rg.d.Active(rigBlockSize, long.Worker()); got != (routing.Load{}) {
		t.Fatalf("after Done engine 1 holds %+v", got)
	}
}

// TestOutputDecayRefused: a negative output decay is refused when the
// Decider is built, naming the key.
func TestOutputDecayRefused(t *testing.T) {
	neg := -1.0
	_, err := NewDecider(DeciderConfig{Policy: NameKV, Options: DefaultOptions(nil), Now: rigClock,
		Tracking: Tracking{OutputBlocks: true, OutputDecay: &neg}}, nil)
	if err == nil || !strings.Contains(err.Error(), "output_block_decay") {
		t.Fatalf("negative decay: %v, want an error naming output_block_decay", err)
	}
}
