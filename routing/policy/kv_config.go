package policy

import "math"

// KVConfig holds the knobs of the KV cost model. Start from DefaultKVConfig
// or a preset: the zero value turns prefill tracking off.
type KVConfig struct {
	// OverlapScoreCredit is the credit, in blocks, per device-cached prefix
	// block (overlap_score_credit). Default 1: a cached block saves exactly
	// its prefill. 0 makes the router ignore the device cache.
	OverlapScoreCredit float64
	// OverlapScoreCreditDecay shrinks the device credit of workers with more
	// active prefill than the least loaded eligible one, by the rational
	// factor 1/(1 + decay*excess), excess in request-sizes of blocks
	// (overlap_score_credit_decay). Default 0 (off); 1 halves the credit at
	// one request of excess. It needs TrackPrefillTokens.
	OverlapScoreCreditDecay float64
	// PrefillLoadScale multiplies the prefill term (prefill_load_scale).
	// Default 1: a block to prefill costs as much as a block held.
	PrefillLoadScale float64
	// HostCacheHitWeight is the credit per block in the host-memory run
	// after the device prefix (host_cache_hit_weight), in [0, 1]. Default
	// 0.75: onloading from host is much cheaper than recomputing, not free.
	HostCacheHitWeight float64
	// DiskCacheHitWeight is the credit per block in the disk run after the
	// host run (disk_cache_hit_weight), in [0, 1]. Default 0.25.
	DiskCacheHitWeight float64
	// SharedCacheMultiplier is the credit per block found in the DC's
	// shared KV store beyond the device prefix (shared_cache_multiplier;
	// Candidate.SharedHits). Default 0, the reference library's: off
	// unless configured (the router node's option defaults to 0.5, the
	// reference command line's).
	SharedCacheMultiplier float64
	// DecodeActiveRequestWeight is a cost in blocks per active request
	// (decode_active_request_weight), for engines whose decode slows with
	// batch size more than with KV use. Default 0.
	DecodeActiveRequestWeight float64
	// Temperature is the softmax sampling temperature (router_temperature).
	// Default 0: pick the cheapest, ties broken uniformly at random.
	Temperature float64
	// TrackPrefillTokens makes active prefill load count in the cost and
	// enables the credit decay. Default on. Off, active prefill counts as
	// zero on every worker (e.g. a decode stage that does no prefill).
	TrackPrefillTokens bool
}

// DefaultKVConfig returns the reference router's defaults.
func DefaultKVConfig() KVConfig {
	return KVConfig{
		OverlapScoreCredit: 1,
		PrefillLoadScale:   1,
		HostCacheHitWeight: 0.75,
		DiskCacheHitWeight: 0.25,
		TrackPrefillTokens: true,
	}
}

// Validate reports the first invalid knob, naming its key.
func (c KVConfig) Validate() error {
	checks := []struct {
		key      string
		v, limit float64
	}{
		{"overlap_score_credit", c.OverlapScoreCredit, math.Inf(1)},
		{"overlap_score_credit_decay", c.OverlapScoreCreditDecay, math.Inf(1)},
		{"prefill_load_scale", c.PrefillLoadScale, math.Inf(1)},
		{"host_cache_hit_weight", c.HostCacheHitWeight, 1},
		{"disk_cache_hit_weight", c.DiskCacheHitWeight, 1},
		{"shared_cache_multiplier", c.SharedCacheMultiplier, math.Inf(1)},
		{"decode_active_request_weight", c.DecodeActiveRequestWeight, math.Inf(1)},
		{"router_temperature", c.Temperature, math.Inf(1)},
	}
	for _, k := range checks {
		if err := checkRange(k.key, k.v, k.limit); err != nil {
			return err
		}
	}
	return nil
}

// checkRange requires 0 <= v <= limit, v finite; NaN fails every test.
func checkRange(key string, v, limit float64) error {
	if math.IsInf(limit, 1) {
		if !(v >= 0) || math.IsInf(v, 1) {
			return configError("%s must be >= 0 and finite, got %v", key, v)
		}
		return nil
	}
	if !(v >= 0 && v <= limit) {
		return configError("%s must be in [0, %v], got %v", key, limit, v)
	}
	return nil
}

// Overrides are per-request changes to the KV cost model
// (router_config_override). A nil field keeps the selector's value.
type Overrides struct {
	OverlapScoreCredit    *float64
	PrefillLoadScale      *float64
	Temperature           *float64
	SharedCacheMultiplier *float64
	TrackPrefillTokens    *bool
}

// empty reports whether no field is set, the common case.
func (o *Overrides) empty() bool {
	return o.OverlapScoreCredit == nil && o.PrefillLoadScale == nil && o.Temperature == nil &&
		o.SharedCacheMultiplier == nil && o.TrackPrefillTokens == nil
}

// apply returns c with the overrides applied.
func (o *Overrides) apply(c KVConfig) KVConfig {
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&c.OverlapScoreCredit, o.OverlapScoreCredit)
	set(&c.PrefillLoadScale, o.PrefillLoadScale)
	set(&c.Temperature, o.Temperature)
	set(&c.SharedCacheMultiplier, o.SharedCacheMultiplier)
	if o.TrackPrefillTokens != nil {
		c.TrackPrefillTokens = *o.TrackPrefillTokens
	}
	return c
}

// validate checks the overridden values on their own, so that a request's
// bad override is reported whatever the selector's configuration.
func (o *Overrides) validate() error {
	if o.empty() {
		return nil
	}
	return o.apply(DefaultKVConfig()).Validate()
}
