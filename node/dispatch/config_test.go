package dispatch

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/policy"
)

func TestConfigValidate(t *testing.T) {
	neg := -1.0
	tests := []struct {
		name string
		edit func(*Config)
		key  string // "" means valid
	}{
		{name: "defaults", edit: func(*Config) {}},
		{name: "unknown policy", edit: func(c *Config) { c.Policy = "fastest" }, key: "policy"},
		{name: "short policy name", edit: func(c *Config) { c.Policy = "rr" }},
		{name: "negative block size", edit: func(c *Config) { c.BlockSize = -1 }, key: "block_size"},
		{name: "huge block size", edit: func(c *Config) { c.BlockSize = 1 << 20 }, key: "block_size"},
		{name: "zero prompt limit", edit: func(c *Config) { c.MaxPromptTokens = -5 }, key: "max_prompt_tokens"},
		{name: "ttl too short", edit: func(c *Config) { c.AffinityTTL = time.Millisecond }, key: "affinity_ttl"},
		{name: "ttl too long", edit: func(c *Config) { c.AffinityTTL = MaxAffinityTTL + time.Second }, key: "affinity_ttl"},
		{name: "ttl at bounds", edit: func(c *Config) { c.AffinityTTL = MaxAffinityTTL }},
		{name: "bad mode", edit: func(c *Config) { c.AffinityMode = 7 }, key: "affinity_mode"},
		{name: "negative sessions", edit: func(c *Config) { c.MaxSessions = -1 }, key: "max_sessions"},
		{name: "bad threshold", edit: func(c *Config) { c.Thresholds.ActiveDecodeBlocks = &neg }, key: "active_decode_blocks_threshold"},
		{name: "bad kv knob", edit: func(c *Config) { c.KV.HostCacheHitWeight = 2 }, key: "host_cache_hit_weight"},
		{name: "negative approx ttl", edit: func(c *Config) { c.ApproxTTL = -1 }, key: "approx_ttl"},
		{name: "unknown approx policy", edit: func(c *Config) { c.ApproxPolicy = 7 }, key: "approx_policy"},
		{name: "lru with kv events", edit: func(c *Config) { c.ApproxPolicy = index.PolicyLRU }, key: "approx_policy"},
		{name: "lru in approximate mode", edit: func(c *Config) { c.ApproxPolicy, c.ApproximateMode = index.PolicyLRU, true }},
		{name: "predict in approximate mode", edit: func(c *Config) { c.PredictTTL = time.Second; c.ApproximateMode = true }, key: "predict_ttl"},
		{name: "negative expiry", edit: func(c *Config) { c.MaxRequestAge = -1 }, key: "active_request_expiry"},
		{name: "no clock", edit: func(c *Config) { c.Now = nil }, key: "now"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if tc.key == "" {
				if err != nil {
					t.Fatalf("valid config refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.key) {
				t.Errorf("err %v, want ErrInvalidConfig naming %s", err, tc.key)
			}
		})
	}
}

// TestShortPolicyNames checks that the reference's short mode names run
// the selector they stand for.
func TestShortPolicyNames(t *testing.T) {
	for short, want := range map[string]string{"rr": policy.NameRoundRobin, "p2c": policy.NamePowerOfTwo} {
		c := DefaultConfig()
		c.Policy = short
		if got := c.EnsureDefaults().Policy; got != want {
			t.Errorf("policy %q: EnsureDefaults gives %q, want %q", short, got, want)
		}
	}
}

func TestEnsureDefaults(t *testing.T) {
	c := Config{}.EnsureDefaults()
	if c.Policy != DefaultPolicy || c.MaxPromptTokens != DefaultMaxPromptTokens || c.MaxSessions != DefaultMaxSessions || c.Now == nil {
		t.Errorf("EnsureDefaults: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}

func TestAffinityModeText(t *testing.T) {
	for _, m := range []AffinityMode{AffinityHard, AffinitySoft} {
		b, _ := m.MarshalText()
		var got AffinityMode
		if err := got.UnmarshalText(b); err != nil || got != m {
			t.Errorf("round trip of %v: %v, %v", m, got, err)
		}
	}
	var m AffinityMode
	if err := m.UnmarshalText([]byte("sticky")); !errors.Is(err, policy.ErrInvalidConfig) {
		t.Errorf("unknown mode: %v", err)
	}
}

func TestNewRefuses(t *testing.T) {
	f := newFakeEngines()
	if _, err := New(DefaultConfig(), nil, nil, nil, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil engines: %v", err)
	}
	if _, err := New(DefaultConfig(), f, nil, nil, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil index outside approximate mode: %v", err)
	}
	c := DefaultConfig()
	c.ApproximateMode = true
	if _, err := New(c, f, nil, nil, nil); err != nil {
		t.Errorf("approximate mode without an exact index: %v", err)
	}
}
