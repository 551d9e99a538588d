package sim

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestDisaggReplayServesEveryRequest: a disaggregated replay serves every
// request through a prefill and a decode engine, reproducibly, with hits on
// the prefill engines; under every policy but direct.
func TestDisaggReplayServesEveryRequest(t *testing.T) {
	reqs := bundled(t, 300)
	cfg := Config{Engines: 4, PrefillEngines: 2, RateScale: 2}
	rs, err := Compare(context.Background(), reqs, Policies(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Requests != 300 || r.PrefillEngines != 2 || r.TTFTP50Ms <= 0 || r.ITLP50Ms <= 0 || r.ITLP99Ms < r.ITLP50Ms {
			t.Errorf("%s: %+v", r.Policy, r)
		}
		if r.HitRatio > r.BoundHitRatio+1e-9 {
			t.Errorf("%s: hit ratio %.3f over the bound %.3f", r.Policy, r.HitRatio, r.BoundHitRatio)
		}
	}
	again, err := Compare(context.Background(), reqs, []string{"kv"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(Policies(), "kv")
	if a, b := again[0], rs[i]; a.TTFTP99Ms != b.TTFTP99Ms || a.HitRatio != b.HitRatio || a.ITLP99Ms != b.ITLP99Ms {
		t.Fatalf("two runs differ: %+v and %+v", a, b)
	}
}

// TestDisaggReplayConfig: a disaggregated replay needs a decode engine.
func TestDisaggReplayConfig(t *testing.T) {
	for _, n := range []int{-1, 4} {
		if err := (Config{Engines: 4, PrefillEngines: n}).Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("prefill engines %d of 4: %v", n, err)
		}
	}
}
