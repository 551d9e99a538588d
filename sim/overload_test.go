package sim

import (
	"context"
	"testing"
)

// TestOverloadTargets runs the overload benchmark's short form: at 3x
// capacity, wspt beats fcfs on mean TTFT, the queue splits service 3:1
// while both classes are backlogged, and no class starves.
func TestOverloadTargets(t *testing.T) {
	ctx := context.Background()
	base := OverloadConfig{Requests: 600, Seed: 1}
	capacity, err := MeasureCapacity(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	base.Capacity, base.Load = capacity, 3
	res := map[string]OverloadResult{}
	for _, mode := range []string{ModeNoQueue, ModeFCFS, ModeWSPT} {
		c := base
		c.Mode = mode
		r, err := Overload(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %+v", mode, r)
		res[mode] = r
	}
	if f, w := res[ModeFCFS].TTFTMeanMs, res[ModeWSPT].TTFTMeanMs; !(w <= 0.7*f) {
		t.Errorf("wspt mean TTFT %.0f ms is over 0.7x fcfs's %.0f ms", w, f)
	}
	for _, mode := range []string{ModeFCFS, ModeWSPT} {
		for _, c := range res[mode].Classes {
			if d := c.Share - c.Weight; d > 0.05 || d < -0.05 {
				t.Errorf("%s: class %s share %.3f, weight %.3f", mode, c.Name, c.Share, c.Weight)
			}
			if c.Finished == 0 {
				t.Errorf("%s: class %s starved", mode, c.Name)
			}
		}
	}
}
