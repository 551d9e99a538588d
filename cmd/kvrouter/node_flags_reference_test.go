package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// resolveNode parses a node command line and environment the way `kvrouter
// node` does before it starts, and returns the resolved configuration.
func resolveNode(t *testing.T, args, env []string) (node.Config, error) {
	t.Helper()
	var f nodeFlags
	fs := pflag.NewFlagSet("node", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return node.Config{}, err
	}
	if err := resolveConfig(fs, f.configPath, env); err != nil {
		return node.Config{}, err
	}
	if err := f.resolve(fs, slog.Default()); err != nil {
		return node.Config{}, err
	}
	return f.cfg, f.cfg.Validate()
}

// TestReferenceCommandLine starts from a reference-style command line and
// environment, as its deployment examples write them, and checks every
// resolved option.
func TestReferenceCommandLine(t *testing.T) {
	args := []string{
		"--router-mode", "kv", "--router-kv-overlap-score-credit", "0.5", "--router-temperature", "0.2",
		"--router-prefill-load-scale", "2", "--router-host-cache-hit-weight", "0.6",
		"--no-router-kv-events", "--router-ttl-secs", "60", "--router-track-output-blocks",
		"--no-router-assume-kv-reuse", "--router-session-affinity-ttl-secs", "300",
		"--router-session-affinity-mode", "soft", "--active-decode-blocks-threshold", "0.85",
		"--active-prefill-tokens-threshold", "10000", "--router-replica-sync",
	}
	env := []string{
		"DYN_ROUTER_MODE=round-robin", // the flag wins
		"DYN_ROUTER_ACTIVE_REQUEST_EXPIRY_SECS=600",
		"DYN_ENCODER_CUDA_TO_CPU_RATIO=4",
		"DYN_HTTP_OVERLOAD_STATUS_CODE=503",
		"DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT=0.9", // the flag wins
		"DYN_NAMESPACE=dynamo",                   // another process's: ignored
	}
	c, err := resolveNode(t, args, env)
	if err != nil {
		t.Fatal(err)
	}
	d := c.Dispatch
	checks := []struct {
		name string
		ok   bool
	}{
		{"router mode", d.Policy == policy.NameKV},
		{"overlap credit", d.KV.OverlapScoreCredit == 0.5},
		{"temperature", d.KV.Temperature == 0.2},
		{"prefill load scale", d.KV.PrefillLoadScale == 2},
		{"host weight", d.KV.HostCacheHitWeight == 0.6},
		{"approximate mode", d.ApproximateMode && c.Events.NoKVEvents},
		{"approx ttl", d.ApproxTTL == time.Minute},
		{"output blocks", d.Tracking.OutputBlocks},
		{"reference output decay", d.Tracking.OutputDecay != nil && *d.Tracking.OutputDecay == 1},
		{"no kv reuse", d.Tracking.NoKVReuse},
		{"affinity ttl", d.AffinityTTL == 5*time.Minute},
		{"affinity soft", d.AffinityMode == policy.AffinitySoft},
		{"decode threshold", d.Thresholds.ActiveDecodeBlocks != nil && *d.Thresholds.ActiveDecodeBlocks == 0.85},
		{"prefill threshold", d.Thresholds.ActivePrefillTokens != nil && *d.Thresholds.ActivePrefillTokens == 10000},
		{"expiry from DYN", d.MaxRequestAge == 10*time.Minute},
		{"cuda ratio from DYN", d.DeviceAware.AcceleratorWeight == 4},
		{"overload status from DYN", c.Frontend.OverloadStatus == 503},
		{"public tracking", d.TrackingKey == nil},
	}
	for _, ck := range checks {
		if !ck.ok {
			t.Errorf("%s: not as the command line says; dispatch config %+v", ck.name, d)
		}
	}
}

func TestReferencePrecedence(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		env    []string
		credit float64
	}{
		{"DYN over default", nil, []string{"DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT=0.3"}, 0.3},
		{"KVR over DYN", nil, []string{"DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT=0.3", "KVR_KV_OVERLAP_SCORE_CREDIT=0.4"}, 0.4},
		{"KVR reference name over DYN", nil, []string{"DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT=0.3", "KVR_ROUTER_KV_OVERLAP_SCORE_CREDIT=0.45"}, 0.45},
		{"reference flag over KVR of the kvrouter name", []string{"--router-kv-overlap-score-credit=0.7"}, []string{"KVR_KV_OVERLAP_SCORE_CREDIT=0.4"}, 0.7},
		{"kvrouter flag over DYN", []string{"--kv-overlap-score-credit=0.8"}, []string{"DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT=0.3"}, 0.8},
		{"deprecated weight 0 zeroes the credit", nil, []string{"DYN_OVERLAP_SCORE_WEIGHT=0"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := resolveNode(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Dispatch.KV.OverlapScoreCredit; got != tc.credit {
				t.Fatalf("credit %v, want %v", got, tc.credit)
			}
		})
	}
}

func TestReferencePresetsAndBooleans(t *testing.T) {
	c, err := resolveNode(t, []string{"--load-aware", "--router-prefill-load-scale=3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := c.Dispatch
	if d.KV.OverlapScoreCredit != 0 || d.KV.PrefillLoadScale != 3 || !d.ApproximateMode || !d.Tracking.NoKVReuse || d.Tracking.NoPrefillTokens {
		t.Fatalf("load-aware: %+v", d)
	}
	c, err = resolveNode(t, []string{"--agentic", "--router-kv-overlap-score-credit=1"}, []string{"DYN_ROUTER_USE_KV_EVENTS=false"})
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Dispatch; d.KV.OverlapScoreCredit != 2 || d.KV.PrefillLoadScale != 4 || d.KV.DecodeActiveRequestWeight != 64 || !d.ApproximateMode {
		t.Fatalf("agentic with DYN_ROUTER_USE_KV_EVENTS=false: %+v", d)
	}
	c, err = resolveNode(t, []string{"--router-kv-overlap-score-weight=2.5", "--no-router-track-prefill-tokens"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Dispatch; d.KV.PrefillLoadScale != 2.5 || d.KV.TrackPrefillTokens || !d.Tracking.NoPrefillTokens {
		t.Fatalf("deprecated weight and --no- form: %+v", d)
	}
	c, err = resolveNode(t, []string{"--output-block-decay=0.5"}, []string{"DYN_ROUTER_TRACK_OUTPUT_BLOCKS=true"})
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Dispatch; !d.Tracking.OutputBlocks || d.Tracking.OutputDecay == nil || *d.Tracking.OutputDecay != 0.5 {
		t.Fatalf("DYN_ROUTER_TRACK_OUTPUT_BLOCKS and --output-block-decay: %+v", d.Tracking)
	}
}

// TestApproximateCachePolicy: the reference's flag and variable select the
// LRU approximate index in approximate mode.
func TestApproximateCachePolicy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args, env []string
		want      index.Policy
	}{
		{"default", []string{"--no-router-kv-events"}, nil, index.PolicyTTL},
		{"flag", []string{"--no-router-kv-events", "--router-approximate-cache-policy", "lru"}, nil, index.PolicyLRU},
		{"DYN", nil, []string{"DYN_ROUTER_USE_KV_EVENTS=false", "DYN_ROUTER_APPROXIMATE_CACHE_POLICY=lru"}, index.PolicyLRU},
		{"load-aware preset", []string{"--load-aware", "--router-approximate-cache-policy=lru"}, nil, index.PolicyLRU},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := resolveNode(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Dispatch.ApproxPolicy; got != tc.want || !c.Dispatch.ApproximateMode {
				t.Fatalf("policy %v (approximate mode %v), want %v", got, c.Dispatch.ApproximateMode, tc.want)
			}
		})
	}
}

// TestSharedCacheFlags: the shared-tier credit is the multiplier unless the
// type is none or the load-aware preset zeroes it, from flags and the
// reference's variables alike.
func TestSharedCacheFlags(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args, env []string
		want      float64
	}{
		{"default", nil, nil, 0.5},
		{"hicache", []string{"--shared-cache-type", "hicache", "--shared-cache-multiplier", "0.8"}, nil, 0.8},
		{"none", []string{"--shared-cache-type=none", "--shared-cache-multiplier", "0.8"}, nil, 0},
		{"DYN", nil, []string{"DYN_SHARED_CACHE_TYPE=hicache", "DYN_SHARED_CACHE_MULTIPLIER=0.3"}, 0.3},
		{"load-aware", []string{"--load-aware", "--shared-cache-multiplier=0.9"}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := resolveNode(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Dispatch.KV.SharedCacheMultiplier; got != tc.want {
				t.Fatalf("shared-cache multiplier %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNegativeDecaysNameTheFlag: both decays are refused at startup with
// an error naming the option as the user set it: the output blocks' decay
// by the flag resolution, the overlap credit's by the configuration's
// validation, which explainConfigError maps to its flag.
func TestNegativeDecaysNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--router-track-output-blocks", "--output-block-decay=-1"}, "--output-block-decay"},
		{[]string{"--router-kv-overlap-score-credit-decay=-1"}, "--kv-overlap-score-credit-decay"},
		{[]string{"--shared-cache-multiplier=-1"}, "--shared-cache-multiplier"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			var f nodeFlags
			fs := pflag.NewFlagSet("node", pflag.ContinueOnError)
			f.register(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if err := resolveConfig(fs, "", nil); err != nil {
				t.Fatal(err)
			}
			err := f.resolve(fs, slog.Default())
			if err == nil {
				err = explainConfigError(fs, "", nil, f.cfg.Validate())
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// TestMinInitialWorkers: the reference's startup gate sets the node's,
// from the flag or its variable.
func TestMinInitialWorkers(t *testing.T) {
	c, err := resolveNode(t, []string{"--router-min-initial-workers", "2"}, nil)
	if err != nil || c.MinInitialEngines != 2 {
		t.Fatalf("flag: %v, %d", err, c.MinInitialEngines)
	}
	c, err = resolveNode(t, nil, []string{"DYN_ROUTER_MIN_INITIAL_WORKERS=3"})
	if err != nil || c.MinInitialEngines != 3 {
		t.Fatalf("DYN: %v, %d", err, c.MinInitialEngines)
	}
}

func writeKey(t *testing.T, n int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, bytes.Repeat([]byte{3}, n), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTrackingKeyFlags(t *testing.T) {
	keyed := "--router-tracking-hash=" + routing.TrackingKeyed
	good := writeKey(t, 32)
	c, err := resolveNode(t, []string{keyed, "--router-tracking-key-file", good, "--router-tracking-key-id", "epoch-7"}, nil)
	if err != nil || c.Dispatch.TrackingKey == nil || c.Dispatch.TrackingKey.ID() != "epoch-7" {
		t.Fatalf("good key: %v, %+v", err, c.Dispatch.TrackingKey)
	}
	tests := []struct {
		name string
		args []string
		flag string
	}{
		{"oversized key file", []string{keyed, "--router-tracking-key-file", writeKey(t, 1<<20), "--router-tracking-key-id", "e"}, "--router-tracking-key-file"},
		{"33-byte key file", []string{keyed, "--router-tracking-key-file", writeKey(t, 33), "--router-tracking-key-id", "e"}, "--router-tracking-key-file"},
		{"short key file", []string{keyed, "--router-tracking-key-file", writeKey(t, 16), "--router-tracking-key-id", "e"}, "--router-tracking-key-file"},
		{"missing key file", []string{keyed, "--router-tracking-key-file", filepath.Join(t.TempDir(), "none"), "--router-tracking-key-id", "e"}, "--router-tracking-key-file"},
		{"no key file", []string{keyed}, "--router-tracking-key-file"},
		{"no key id", []string{keyed, "--router-tracking-key-file", good}, "--router-tracking-key-id"},
		{"unknown algorithm", []string{"--router-tracking-hash=md5"}, "--router-tracking-hash"},
		{"key without keyed hash", []string{"--router-tracking-key-file", good}, "--router-tracking-key-file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resolveNode(t, tc.args, nil)
			if err == nil || !strings.Contains(err.Error(), tc.flag) {
				t.Fatalf("err = %v, want one naming %s", err, tc.flag)
			}
		})
	}
}

func TestReferenceBadValuesNameTheFlag(t *testing.T) {
	tests := []struct {
		args []string
		flag string
	}{
		{[]string{"--load-aware", "--agentic"}, "--agentic"},
		{[]string{"--shared-cache-type=redis"}, "--shared-cache-type"},
		{[]string{"--shared-cache-multiplier=-0.5"}, "--shared-cache-multiplier"},
		{[]string{"--router-prefill-load-model=aic"}, "--router-prefill-load-model"},
		{[]string{"--no-router-track-active-blocks"}, "--no-router-track-active-blocks"},
		{[]string{"--router-ttl-secs=-1"}, "router-ttl-secs"},
		{[]string{"--router-active-sequence-stride=0"}, "--router-active-sequence-stride"},
		{[]string{"--router-active-sequence-stride=4"}, "--router-active-sequence-stride"},
		{[]string{"--router-min-initial-workers=-1"}, "--router-min-initial-workers"},
		{[]string{"--no-router-kv-events", "--router-approximate-cache-policy=fifo"}, "--router-approximate-cache-policy"},
		{[]string{"--router-approximate-cache-policy=lru"}, "--router-approximate-cache-policy"},
		{[]string{"--router-track-output-blocks", "--output-block-decay=-0.5"}, "--output-block-decay"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := resolveNode(t, tc.args, nil)
			if err == nil || !strings.Contains(err.Error(), tc.flag) {
				t.Fatalf("err = %v, want one naming %s", err, tc.flag)
			}
		})
	}
	if _, err := resolveNode(t, nil, []string{"DYN_ROUTER_TEMPERATURE_X=1", "DYN_ROUTER_PREFILL_LOAD_SCALE=abc"}); err == nil ||
		!strings.Contains(err.Error(), "DYN_ROUTER_PREFILL_LOAD_SCALE") {
		t.Fatalf("bad DYN value: err = %v", err)
	}
}
