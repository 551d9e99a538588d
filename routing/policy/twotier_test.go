package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestTwoTier(t *testing.T) {
	req := Request{ISLTokens: 160, BlockSize: 16} // 10 blocks
	tests := []struct {
		name   string
		cfg    TwoTierConfig
		req    Request
		cands  []Candidate
		want   int
		reason string
	}{
		{
			name: "load tier when both thresholds are exceeded",
			cfg:  DefaultTwoTierConfig(),
			req:  req,
			// spread 40 > 32 and 50 > 1.1*10: least loaded despite the cache.
			cands:  []Candidate{withActive(c(1, 10, 0, 0, 0), 50), withActive(c(2, 0, 0, 0, 0), 10)},
			want:   1,
			reason: "load",
		},
		{
			name: "relative threshold not exceeded keeps cache tier",
			cfg:  DefaultTwoTierConfig(),
			req:  req,
			// spread 40 > 32 but 400 <= 1.1*370.
			cands:  []Candidate{withActive(c(1, 10, 0, 0, 0), 400), withActive(c(2, 0, 0, 0, 0), 370)},
			want:   0,
			reason: "cache",
		},
		{
			name: "cache tier picks least loaded among best overlap",
			cfg:  DefaultTwoTierConfig(),
			req:  req,
			cands: []Candidate{
				withActive(c(1, 6, 0, 0, 0), 3),
				withActive(c(2, 8, 0, 0, 0), 5),
				withActive(c(3, 0, 0, 0, 0), 0),
				withActive(c(4, 8, 0, 0, 0), 4),
			},
			want:   3,
			reason: "cache",
		},
		{
			name: "cache threshold is strict",
			cfg:  DefaultTwoTierConfig(),
			req:  req,
			// 5/10 = 0.5 is not above 0.5.
			cands:  []Candidate{withActive(c(1, 5, 0, 0, 0), 3), withActive(c(2, 0, 0, 0, 0), 1)},
			want:   1,
			reason: "least-loaded",
		},
		{
			name: "host blocks count with their weight",
			cfg:  DefaultTwoTierConfig(),
			req:  req,
			// 4 + 0.75*4 = 7 beats 6.
			cands: []Candidate{
				withActive(c(1, 6, 0, 0, 0), 0),
				func() Candidate { x := withActive(c(2, 4, 0, 0, 0), 2); x.Overlap.Host = 4; return x }(),
			},
			want:   1,
			reason: "cache",
		},
		{
			name: "partial tail block counts in the denominator",
			cfg:  TwoTierConfig{CacheThreshold: 0.9, BalanceAbsThreshold: 32, BalanceRelThreshold: 1.1},
			// 9 full blocks cached of ceil(150/16) = 10: 0.9 is not above 0.9.
			req:    Request{ISLTokens: 150, BlockSize: 16},
			cands:  []Candidate{withActive(c(1, 9, 0, 0, 0), 2), withActive(c(2, 0, 0, 0, 0), 1)},
			want:   1,
			reason: "least-loaded",
		},
		{
			name:   "ties go to the first candidate",
			cfg:    DefaultTwoTierConfig(),
			req:    req,
			cands:  []Candidate{withActive(c(1, 0, 0, 0, 0), 2), withActive(c(2, 0, 0, 0, 0), 1), withActive(c(3, 0, 0, 0, 0), 1)},
			want:   1,
			reason: "least-loaded",
		},
		{
			name:   "empty prompt skips the cache tier",
			cfg:    DefaultTwoTierConfig(),
			req:    Request{BlockSize: 16},
			cands:  []Candidate{withActive(c(1, 0, 0, 0, 0), 2), withActive(c(2, 0, 0, 0, 0), 1)},
			want:   1,
			reason: "least-loaded",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewTwoTier(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			var d Decision
			if err := s.Select(&d, &tc.req, tc.cands); err != nil {
				t.Fatal(err)
			}
			if d.Index != tc.want || d.Reason != tc.reason {
				t.Fatalf("picked %d (%s), want %d (%s)", d.Index, d.Reason, tc.want, tc.reason)
			}
		})
	}
}

func TestTwoTierConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*TwoTierConfig)
		key  string
	}{
		{"threshold above 1", func(c *TwoTierConfig) { c.CacheThreshold = 1.2 }, "cache_threshold"},
		{"negative abs", func(c *TwoTierConfig) { c.BalanceAbsThreshold = -1 }, "balance_abs_threshold"},
		{"rel below 1", func(c *TwoTierConfig) { c.BalanceRelThreshold = 0.9 }, "balance_rel_threshold must be >= 1.0"},
		{"host weight", func(c *TwoTierConfig) { c.HostCacheWeight = 2 }, "host_cache_weight"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultTwoTierConfig()
			tc.mod(&cfg)
			if _, err := NewTwoTier(cfg); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("NewTwoTier() = %v, want error naming %q", err, tc.key)
			}
		})
	}
	if err := DefaultTwoTierConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}
