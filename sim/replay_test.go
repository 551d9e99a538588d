package sim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/policy"
	"github.com/kvrouter/kvrouter/traces"
)

func bundled(t *testing.T, n int) []traces.Request {
	t.Helper()
	reqs, err := traces.ReadBytes(traces.MooncakeSynthetic)
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		reqs = reqs[:n]
	}
	return reqs
}

// TestBundledTraceKVBeatsRoundRobin is the acceptance check of the demo's
// defaults: on the whole bundled trace the kv policy reuses more cache and
// answers faster than round-robin, without unbalancing the fleet.
func TestBundledTraceKVBeatsRoundRobin(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the whole trace")
	}
	rs, err := Compare(context.Background(), bundled(t, 0), []string{"kv", "round-robin"}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	kv, rr := rs[0], rs[1]
	t.Logf("kv: %+v", kv)
	t.Logf("round-robin: %+v", rr)
	if kv.Requests != 3993 || rr.Requests != 3993 {
		t.Fatalf("served %d and %d of 3993 requests", kv.Requests, rr.Requests)
	}
	if kv.HitRatio <= rr.HitRatio {
		t.Errorf("kv hit ratio %.3f <= round-robin %.3f", kv.HitRatio, rr.HitRatio)
	}
	if kv.TTFTMeanMs >= rr.TTFTMeanMs {
		t.Errorf("kv mean TTFT %.0f ms >= round-robin %.0f ms", kv.TTFTMeanMs, rr.TTFTMeanMs)
	}
	if kv.LoadMaxOverMean > 1.3 {
		t.Errorf("kv load max/mean %.2f > 1.3", kv.LoadMaxOverMean)
	}
}

// Every policy stays under the infinite-cache bound: an engine can only hit
// a block that an earlier request computed.
func TestEveryPolicyStaysUnderTheBound(t *testing.T) {
	reqs := bundled(t, 400)
	names := []string{"kv", "two-tier", "round-robin", "random", "power-of-two", "least-loaded", "device-aware-weighted"}
	rs, err := Compare(context.Background(), reqs, names, Config{Engines: 3, RateScale: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Requests != len(reqs) {
			t.Errorf("%s served %d of %d", r.Policy, r.Requests, len(reqs))
		}
		if r.HitRatio < 0 || r.HitRatio > r.BoundHitRatio+1e-12 {
			t.Errorf("%s hit ratio %.4f outside [0, bound %.4f]", r.Policy, r.HitRatio, r.BoundHitRatio)
		}
		if r.TTFTP50Ms <= 0 || r.TTFTP99Ms < r.TTFTP50Ms || r.LoadMaxOverMean < 1 {
			t.Errorf("%s implausible figures: %+v", r.Policy, r)
		}
	}
}

func TestRunIsDeterministic(t *testing.T) {
	reqs := bundled(t, 300)
	run := func() (Result, []Record) {
		rs, err := Compare(context.Background(), reqs, []string{"kv"}, Config{Engines: 2, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		r := rs[0]
		r.DecisionP50Us, r.DecisionP99Us = 0, 0 // wall-clock measurements
		d := r.Detail.Decisions
		r.Detail = nil
		return r, d
	}
	a, da := run()
	b, db := run()
	if a != b || !slices.Equal(da, db) {
		t.Fatalf("two runs differ:\n%+v\n%+v", a, b)
	}
}

func TestApproximateModeLearnsFromDecisions(t *testing.T) {
	reqs := bundled(t, 600)
	for _, p := range []index.Policy{index.PolicyTTL, index.PolicyLRU} {
		rs, err := Compare(context.Background(), reqs, []string{"kv"}, Config{NoKVEvents: true, ApproxPolicy: p})
		if err != nil {
			t.Fatal(err)
		}
		if rs[0].HitRatio <= 0 {
			t.Fatalf("approximate mode (%v) found no reuse: %+v", p, rs[0])
		}
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		key  string
	}{
		{"engines", Config{Engines: -1}, "engines"},
		{"too many engines", Config{Engines: MaxEngines + 1}, "engines"},
		{"block size", Config{BlockSize: 48}, "block_size"},
		{"rate", Config{RateScale: -2}, "rate_scale"},
		{"lru with kv events", Config{ApproxPolicy: index.PolicyLRU}, "approx_policy"},
		{"osl hints without output tracking", Config{OutputHints: true}, "output_hints"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("err = %v, want ErrConfig naming %q", err, tc.key)
			}
		})
	}
}

func TestNoPolicies(t *testing.T) {
	if _, err := Compare(context.Background(), bundled(t, 10), nil, Config{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("err = %v, want ErrConfig", err)
	}
}

func TestUnknownPolicy(t *testing.T) {
	_, err := Compare(context.Background(), bundled(t, 10), []string{"nope"}, Config{})
	if !errors.Is(err, policy.ErrUnknownPolicy) {
		t.Fatalf("err = %v, want ErrUnknownPolicy", err)
	}
}

func TestCanceledContextStopsTheReplay(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Compare(ctx, bundled(t, 100), []string{"kv"}, Config{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
