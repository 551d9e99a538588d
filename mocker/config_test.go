package mocker

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestConfigDefaults(t *testing.T) {
	var c Config
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.BlockSize != 64 || c.NumBlocks != 7152 || c.MaxNumBatchedTokens != 8192 || c.MaxNumSeqs != 256 || c.SpeedUp != 1 {
		t.Fatalf("defaults %+v", c)
	}
	if c.Timing.TokenNanos != DefaultTokenNanos || c.Timing.WeightRead != DefaultWeightRead {
		t.Fatalf("timing defaults %+v", c.Timing)
	}
}

func TestConfigValidateNamesField(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{name: "block size", edit: func(c *Config) { c.BlockSize = -1 }, field: "BlockSize"},
		{name: "blocks", edit: func(c *Config) { c.NumBlocks = -5 }, field: "NumBlocks"},
		{name: "budget", edit: func(c *Config) { c.MaxNumBatchedTokens = -1 }, field: "MaxNumBatchedTokens"},
		{name: "seqs", edit: func(c *Config) { c.MaxNumSeqs = -1 }, field: "MaxNumSeqs"},
		{name: "ring", edit: func(c *Config) { c.EventRingSize = -1 }, field: "EventRingSize"},
		{name: "ring too big", edit: func(c *Config) { c.EventRingSize = 1 << 40 }, field: "EventRingSize"},
		{name: "model len", edit: func(c *Config) { c.MaxModelLen = -1 }, field: "MaxModelLen"},
		{name: "speed-up", edit: func(c *Config) { c.SpeedUp = -2 }, field: "SpeedUp"},
		{name: "speed-up nan", edit: func(c *Config) { c.SpeedUp = math.NaN() }, field: "SpeedUp"},
		{name: "speed-up inf", edit: func(c *Config) { c.SpeedUp = math.Inf(1) }, field: "SpeedUp"},
		{name: "overhead", edit: func(c *Config) { c.Timing.IterationOverhead = -1 }, field: "IterationOverhead"},
		{name: "weights", edit: func(c *Config) { c.Timing.WeightRead = -1 }, field: "WeightRead"},
		{name: "token", edit: func(c *Config) { c.Timing.TokenNanos = math.NaN() }, field: "TokenNanos"},
		{name: "pairs", edit: func(c *Config) { c.Timing.AttentionPairNanos = -1 }, field: "AttentionPairNanos"},
		{name: "kv read", edit: func(c *Config) { c.Timing.KVReadNanos = math.Inf(1) }, field: "KVReadNanos"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			c.EnsureDefaults()
			tc.edit(&c)
			err := c.Validate()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("err %v, want ErrConfig naming %s", err, tc.field)
			}
			if _, err := New(c, testWorker); !errors.Is(err, ErrConfig) {
				t.Fatalf("New accepted the config: %v", err)
			}
		})
	}
}
