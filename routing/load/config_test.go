package load

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantKey string // empty means valid
	}{
		{name: "default", cfg: DefaultConfig(16)},
		{name: "no kv reuse", cfg: noKVReuse(64)},
		{name: "expiry disabled", cfg: Config{BlockSize: 1}},
		{name: "zero block size", cfg: DefaultConfig(0), wantKey: "block_size"},
		{name: "negative block size", cfg: DefaultConfig(-4), wantKey: "block_size"},
		{name: "negative expiry", cfg: Config{BlockSize: 16, MaxRequestAge: -time.Second}, wantKey: "active_request_expiry"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantKey) {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig naming %q", err, tc.wantKey)
			}
			if _, err := New(tc.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New() = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	c := DefaultConfig(16)
	if !c.TrackPrefillTokens || !c.AssumeKVReuse || c.TrackOutputBlocks || c.MaxRequestAge != 300*time.Second {
		t.Fatalf("DefaultConfig = %+v", c)
	}
}

// noKVReuse is the tracker configuration of the --load-aware preset: KV
// reuse is not assumed (the router has no cache state to trust), while
// prefill tokens are tracked.
func noKVReuse(blockSize int) Config {
	c := DefaultConfig(blockSize)
	c.AssumeKVReuse = false
	return c
}
