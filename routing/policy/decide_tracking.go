package policy

import (
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/load"
)

// Tracking switches the load tracker's toggles away from the reference
// defaults. The zero value is the default: active blocks de-duplicated
// across requests that share a prompt (KV reuse assumed), prefill tokens
// tracked (the KV selector's KVConfig.TrackPrefillTokens says whether
// they count in the cost), output blocks not tracked.
type Tracking struct {
	// NoKVReuse books every request's prompt blocks in full, as for a
	// disaggregated decode stage or the load-aware preset, where the
	// router has no cache state to trust (assume_kv_reuse off).
	NoKVReuse bool
	// NoPrefillTokens books no prefill load (track_prefill_tokens off).
	NoPrefillTokens bool
	// NoActiveBlocks books no KV blocks (track_active_blocks off), as for
	// a disaggregated prefill stage, which hands its blocks off and does
	// no decode.
	NoActiveBlocks bool
	// OutputBlocks adds a block each time a request's output crosses a
	// block boundary (track_output_blocks), and books the blocks of an
	// expected output length at routing.
	OutputBlocks bool
	// OutputDecay, when set, replaces load.DefaultOutputDecay: how fast
	// the output blocks of a request with an expected length lose weight
	// as it nears that length (output_block_decay, load.Config.OutputDecay).
	OutputDecay *float64
}

// apply sets the toggles on a tracker configuration.
func (t Tracking) apply(c load.Config) load.Config {
	c.TrackActiveBlocks = !t.NoActiveBlocks
	c.AssumeKVReuse = !t.NoKVReuse
	c.TrackPrefillTokens = !t.NoPrefillTokens
	c.TrackOutputBlocks = t.OutputBlocks
	if t.OutputDecay != nil {
		c.OutputDecay = *t.OutputDecay
	}
	return c
}

// validate checks the toggles' values with the tracker's own rules, so
// that a bad one is refused when the Decider is built rather than when
// the first tracker is.
func (t Tracking) validate() error {
	if err := t.apply(load.DefaultConfig(1)).Validate(); err != nil {
		return configError("tracking: %w", err)
	}
	return nil
}

// mask zeroes the blocks of an engine-reported load when the trackers
// book none (a prefill stage): the stage must not count the blocks its
// engines report either, or the blocks a prefill engine holds only until
// their hand-off would outweigh the cache it keeps.
func (t Tracking) mask(l routing.Load) routing.Load {
	if t.NoActiveBlocks {
		l.DecodeBlocks = 0
	}
	return l
}
