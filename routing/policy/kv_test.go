package policy

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// TestWorkedExample reproduces the reference's example: three workers, a
// 10-block request with no other prefill, device overlaps 2/5/8, decode
// blocks 10/5/9, give costs 18/10/11 and the second worker wins.
func TestWorkedExample(t *testing.T) {
	req := &Request{ISLTokens: 160, BlockSize: 16}
	cands := []Candidate{
		c(1, 2, 160-2*16, 10, 0),
		c(2, 5, 160-5*16, 5, 0),
		c(3, 8, 160-8*16, 9, 0),
	}
	kv, err := NewKV(DefaultKVConfig(), rng(1))
	if err != nil {
		t.Fatal(err)
	}
	var d Decision
	if err := kv.Select(&d, req, cands); err != nil {
		t.Fatal(err)
	}
	want := []float64{18, 10, 11}
	for i := range want {
		if !near(d.Costs[i], want[i]) {
			t.Fatalf("costs = %v, want %v", d.Costs, want)
		}
	}
	if d.Worker != (routing.Worker{ID: 2}) || d.Index != 1 || d.Cost != 10 || d.Overlap.Device != 5 || d.Reason != "argmin" {
		t.Fatalf("decision = %+v", d)
	}
}

func TestKVCost(t *testing.T) {
	base := func() KVConfig { return DefaultKVConfig() }
	tests := []struct {
		name  string
		cfg   KVConfig
		req   Request
		cands []Candidate
		want  []float64
	}{
		{
			name: "active prefill adds to raw prefill",
			cfg:  base(),
			req:  Request{ISLTokens: 64, BlockSize: 16},
			// 32 active tokens + 64-token request, 2 cached: (32+64)/16-2 = 4.
			cands: []Candidate{c(1, 2, 32+32, 7, 3)},
			want:  []float64{4 + 7},
		},
		{
			name: "lower tiers credit with their weights",
			cfg:  base(),
			req:  Request{ISLTokens: 160, BlockSize: 16},
			cands: []Candidate{{
				Overlap:    routing.Overlap{Device: 2, Host: 4, Disk: 4},
				SharedHits: 2,
				Load:       routing.Load{PrefillTokens: 128},
			}},
			want: []float64{10 - 2 - 3 - 1},
		},
		{
			name: "shared cache multiplier",
			cfg:  KVConfig{OverlapScoreCredit: 1, PrefillLoadScale: 1, SharedCacheMultiplier: 0.5, TrackPrefillTokens: true},
			req:  Request{ISLTokens: 160, BlockSize: 16},
			cands: []Candidate{{
				SharedHits: 4,
				Load:       routing.Load{PrefillTokens: 160},
			}},
			want: []float64{10 - 2},
		},
		{
			name:  "credit beyond the prompt clamps at zero",
			cfg:   KVConfig{OverlapScoreCredit: 3, PrefillLoadScale: 1, TrackPrefillTokens: true},
			req:   Request{ISLTokens: 64, BlockSize: 16},
			cands: []Candidate{c(1, 4, 0, 5, 0)},
			want:  []float64{5},
		},
		{
			name:  "prefill scale and active request weight",
			cfg:   KVConfig{OverlapScoreCredit: 1, PrefillLoadScale: 4, DecodeActiveRequestWeight: 32, TrackPrefillTokens: true},
			req:   Request{ISLTokens: 64, BlockSize: 16},
			cands: []Candidate{c(1, 1, 48, 6, 2)},
			want:  []float64{4*3 + 6 + 64},
		},
		{
			name:  "untracked prefill ignores active prefill",
			cfg:   KVConfig{OverlapScoreCredit: 1, PrefillLoadScale: 1},
			req:   Request{ISLTokens: 64, BlockSize: 16},
			cands: []Candidate{c(1, 1, 1000, 6, 2)},
			want:  []float64{3 + 6},
		},
		{
			name: "decay halves device credit at one request of excess",
			cfg:  KVConfig{OverlapScoreCredit: 1, OverlapScoreCreditDecay: 1, PrefillLoadScale: 1, TrackPrefillTokens: true},
			req:  Request{ISLTokens: 160, BlockSize: 16},
			cands: []Candidate{
				c(1, 0, 160, 0, 0),         // active 0: the least loaded
				c(2, 8, 160+160-128, 0, 0), // active 160 = one request: credit 8/2
			},
			want: []float64{10, 20 - 4},
		},
		{
			name:  "fractional blocks",
			cfg:   base(),
			req:   Request{ISLTokens: 40, BlockSize: 16},
			cands: []Candidate{c(1, 1, 24, 3, 0)},
			want:  []float64{40.0/16 - 1 + 3},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.cfg.Costs(nil, &tc.req, tc.cands)
			for i := range tc.want {
				if !near(got[i], tc.want[i]) {
					t.Fatalf("costs = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestKVOverrides(t *testing.T) {
	req := &Request{ISLTokens: 160, BlockSize: 16}
	// Worker 1 holds the prefix but has more decode load; with credit 0
	// the cache no longer matters and worker 2 wins.
	cands := []Candidate{c(1, 10, 0, 8, 0), c(2, 0, 160, 4, 0)}
	kv, _ := NewKV(DefaultKVConfig(), rng(1))
	var d Decision
	if err := kv.Select(&d, req, cands); err != nil || d.Index != 0 {
		t.Fatalf("default: index %d, err %v", d.Index, err)
	}
	req.Overrides.OverlapScoreCredit = new(0.0)
	if err := kv.Select(&d, req, cands); err != nil || d.Index != 1 {
		t.Fatalf("credit 0: index %d, err %v (costs %v)", d.Index, err, d.Costs)
	}
	if kv.Config().OverlapScoreCredit != 1 {
		t.Fatal("override leaked into the selector's config")
	}
	req.Overrides.Temperature = new(-1.0)
	err := kv.Select(&d, req, cands)
	if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "router_temperature") {
		t.Fatalf("bad override: %v", err)
	}
}

func TestKVConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*KVConfig)
		key  string
	}{
		{"negative credit", func(c *KVConfig) { c.OverlapScoreCredit = -1 }, "overlap_score_credit must"},
		{"infinite credit", func(c *KVConfig) { c.OverlapScoreCredit = math.Inf(1) }, "overlap_score_credit must"},
		{"NaN decay", func(c *KVConfig) { c.OverlapScoreCreditDecay = math.NaN() }, "overlap_score_credit_decay"},
		{"negative scale", func(c *KVConfig) { c.PrefillLoadScale = -0.5 }, "prefill_load_scale"},
		{"host weight above 1", func(c *KVConfig) { c.HostCacheHitWeight = 1.5 }, "host_cache_hit_weight"},
		{"disk weight negative", func(c *KVConfig) { c.DiskCacheHitWeight = -0.1 }, "disk_cache_hit_weight"},
		{"negative shared", func(c *KVConfig) { c.SharedCacheMultiplier = -1 }, "shared_cache_multiplier"},
		{"negative request weight", func(c *KVConfig) { c.DecodeActiveRequestWeight = -1 }, "decode_active_request_weight"},
		{"negative temperature", func(c *KVConfig) { c.Temperature = -0.1 }, "router_temperature must be >= 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultKVConfig()
			tc.mod(&cfg)
			err := cfg.Validate()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig naming %q", err, tc.key)
			}
			if _, err := NewKV(cfg, rng(1)); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("NewKV() = %v", err)
			}
		})
	}
	if _, err := NewKV(DefaultKVConfig(), nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("NewKV(nil rand) = %v", err)
	}
}

// TestKVTieBreakUniform checks that exact ties are broken uniformly: four
// tied cheapest workers among eight should each win a quarter of 40,000
// draws. The chi-square bound is the 0.1% critical value for 3 degrees of
// freedom; with the fixed seed the test is deterministic.
func TestKVTieBreakUniform(t *testing.T) {
	req := &Request{ISLTokens: 64, BlockSize: 16}
	var cands []Candidate
	for i := range 8 {
		decode := int64(5)
		if i%2 == 1 {
			decode = 6 // odd workers cost more and must never win
		}
		cands = append(cands, c(i, 0, 64, decode, 0))
	}
	kv, _ := NewKV(DefaultKVConfig(), rng(7))
	got := counts(t, kv, req, cands, 40000)
	var tied []int
	for i, n := range got {
		if i%2 == 1 && n != 0 {
			t.Fatalf("costlier worker %d won %d times", i, n)
		}
		if i%2 == 0 {
			tied = append(tied, n)
		}
	}
	if x := chiSquare(tied, []float64{0.25, 0.25, 0.25, 0.25}); x > 16.27 {
		t.Fatalf("tie-break counts %v, chi-square %.2f > 16.27", tied, x)
	}
}

// TestKVTemperature checks the softmax distribution: costs 0, 5 and 10 at
// temperature 1 are chosen with probabilities proportional to e^0, e^-0.5,
// e^-1. The bound is the 0.1% chi-square critical value for 2 degrees of
// freedom.
func TestKVTemperature(t *testing.T) {
	req := &Request{ISLTokens: 0, BlockSize: 16, Overrides: Overrides{Temperature: new(1.0)}}
	cands := []Candidate{c(1, 0, 0, 0, 0), c(2, 0, 0, 5, 0), c(3, 0, 0, 10, 0)}
	kv, _ := NewKV(DefaultKVConfig(), rng(3))
	got := counts(t, kv, req, cands, 60000)
	w := []float64{1, math.Exp(-0.5), math.Exp(-1)}
	sum := w[0] + w[1] + w[2]
	p := []float64{w[0] / sum, w[1] / sum, w[2] / sum}
	if x := chiSquare(got, p); x > 13.82 {
		t.Fatalf("counts %v for p %v: chi-square %.2f > 13.82", got, p, x)
	}
	// Equal costs at a positive temperature are sampled uniformly.
	eq := []Candidate{c(1, 0, 0, 4, 0), c(2, 0, 0, 4, 0), c(3, 0, 0, 4, 0)}
	got = counts(t, kv, req, eq, 30000)
	if x := chiSquare(got, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}); x > 13.82 {
		t.Fatalf("equal costs: counts %v, chi-square %.2f", got, x)
	}
}

// TestKVDeterministic checks that one seed gives one sequence of choices.
func TestKVDeterministic(t *testing.T) {
	req := &Request{ISLTokens: 64, BlockSize: 16}
	cands := []Candidate{c(1, 0, 64, 5, 0), c(2, 0, 64, 5, 0), c(3, 0, 64, 5, 0)}
	a, _ := NewKV(DefaultKVConfig(), rng(11))
	b, _ := NewKV(DefaultKVConfig(), rng(11))
	var da, db Decision
	for i := range 100 {
		_ = a.Select(&da, req, cands)
		_ = b.Select(&db, req, cands)
		if da.Index != db.Index {
			t.Fatalf("draw %d: %d vs %d", i, da.Index, db.Index)
		}
	}
}

// TestSelectDoesNotAllocate checks that a reused Decision makes the kv
// selector and the pipeline allocation-free.
func TestSelectDoesNotAllocate(t *testing.T) {
	kv, _ := NewKV(DefaultKVConfig(), rng(1))
	p, _ := NewPipeline(Thresholds{ActiveDecodeBlocks: new(0.9)}, kv)
	cands := []Candidate{c(1, 2, 64, 5, 1), c(2, 2, 64, 5, 1), c(3, 0, 96, 5, 2)}
	req := &Request{ISLTokens: 96, BlockSize: 16}
	var d Decision
	_ = p.Route(&d, req, cands)
	if n := testing.AllocsPerRun(100, func() { _ = p.Route(&d, req, cands) }); n != 0 {
		t.Fatalf("Route allocated %v times per call", n)
	}
}
