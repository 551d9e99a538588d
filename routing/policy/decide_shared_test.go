package policy

import (
	"context"
	"fmt"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// TestSharedCacheMultiplierMovesTheChoice: prompt P (8 blocks) has its
// first 4 blocks on engine 1's device, engine 1 also runs a 3-block
// request, engine 2 is idle and holds nothing of its own. Engine 2 wrote
// all of P to the DC's shared KV store (the shared tier), which both
// engines can load from: engine 1 gets 4 shared hits beyond its device
// prefix, engine 2 gets 8. Without shared credit the device prefix wins
// (costs 15 against 16); at multiplier 0.5 the shared hits move the
// choice to engine 2 (13 against 12). Without shared-tier blocks the
// multiplier changes nothing.
func TestSharedCacheMultiplierMovesTheChoice(t *testing.T) {
	p := prompt(1, 8)
	for _, tc := range []struct {
		mult   float64
		shared bool
		want   routing.WorkerID
		hits   [2]int32
		costs  [2]float64
	}{
		{0, true, 1, [2]int32{4, 8}, [2]float64{15, 16}},
		{0.5, true, 2, [2]int32{4, 8}, [2]float64{13, 12}},
		{0.5, false, 1, [2]int32{0, 0}, [2]float64{15, 16}},
	} {
		t.Run(fmt.Sprintf("multiplier %v shared %v", tc.mult, tc.shared), func(t *testing.T) {
			opts := DefaultOptions(nil)
			opts.KV.SharedCacheMultiplier = tc.mult
			rg := newRig(t, DeciderConfig{Policy: NameKV, Options: opts}, 2, 1000)
			rg.store(1, p[:4*rigBlockSize], routing.TierDevice)
			if tc.shared {
				rg.store(2, p, routing.TierShared)
			}
			_, busy := rg.route("busy", prompt(2, 3), 1, 0)
			busy.FirstToken(context.Background())
			w, b := rg.route("p", p, 0, 0)
			for i, c := range rg.sc.Candidates() {
				if c.SharedHits != tc.hits[i] {
					t.Errorf("engine %d: %d shared hits, want %d", c.Info.Worker.ID, c.SharedHits, tc.hits[i])
				}
			}
			if got := rg.sc.Decision().Costs; len(got) != 2 || got[0] != tc.costs[0] || got[1] != tc.costs[1] {
				t.Errorf("costs %v, want %v", got, tc.costs)
			}
			if w.ID != tc.want {
				t.Fatalf("P went to engine %d, want %d", w.ID, tc.want)
			}
			b.Done(context.Background(), Succeeded)
			busy.Done(context.Background(), Succeeded)
		})
	}
}
