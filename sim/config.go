package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/mocker"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// ErrConfig is returned for an invalid simulation configuration; the message
// names the offending key.
var ErrConfig = errors.New("sim: invalid config")

// Config is one simulation's setup. The zero value of a field means its
// default.
type Config struct {
	// Engines is the number of simulated engines (one rank each). Default 4:
	// at the bundled trace's rate that keeps the fleet busy enough for
	// routing to matter without saturating it.
	Engines int
	// BlockSize is the engines' KV block size in tokens; it must divide the
	// trace's 512-token blocks. Default 64, the mocker's default.
	BlockSize int
	// RateScale multiplies the trace's arrival rate (2 replays it twice as
	// fast). Default 1.
	RateScale float64
	// Seed seeds the selectors' random tie-breaks. Default 1.
	Seed uint64
	// Engine configures every engine; its BlockSize is forced to BlockSize.
	Engine mocker.Config
	// KV configures the kv selector's cost model; the zero value means the
	// reference defaults.
	KV *policy.KVConfig
	// KVTTFT configures the kv-ttft selector; nil means its defaults.
	KVTTFT *policy.KVTTFTConfig
	// Thresholds are the busy thresholds of the eligibility filter; the zero
	// value disables them.
	Thresholds policy.Thresholds
	// NoKVEvents runs the router in approximate mode: it ignores the
	// engines' KV events and indexes its own decisions with a TTL.
	NoKVEvents bool
	// ApproxPolicy is how approximate mode's index forgets, as the node's
	// router-approximate-cache-policy: index.PolicyTTL (default) or
	// index.PolicyLRU, which models each engine's cache at its capacity.
	// LRU needs NoKVEvents.
	ApproxPolicy index.Policy
	// PredictTTL enables the router's predict-on-route side index with
	// this TTL, as the node's router-predicted-ttl does. Default 0 (off),
	// the node's default.
	PredictTTL time.Duration
	// AffinityTTL enables session affinity for prompts that carry a
	// session, with this idle TTL; AffinityMode and MaxSessions are the
	// node's keys of the same names. Default 0 (off), the node's default.
	AffinityTTL  time.Duration
	AffinityMode policy.AffinityMode
	MaxSessions  int
	// TrackOutputBlocks turns on the router's output-block tracking, as
	// the node's router-track-output-blocks: after every engine iteration
	// each running request's generated tokens are reported to its booking,
	// as a node's frontend reports streamed chunks. OutputHints also gives
	// each request the trace's output length as its expected length (the
	// nvext osl hint a client may send), whose output weight then decays
	// (OutputDecay, nil: load.DefaultOutputDecay).
	TrackOutputBlocks bool
	OutputHints       bool
	OutputDecay       *float64
	// ReportInterval is the period of the engines' load reports, which the
	// router adds to its own bookings as a node adds heartbeats. Default
	// DefaultReportInterval. NoLoadReports turns them off.
	ReportInterval time.Duration
	NoLoadReports  bool
	// PrefillEngines, when positive, replays the trace disaggregated
	// (disagg.go): that many of the Engines are prefill engines, the
	// others decode engines, and each request is routed by the node's
	// two-hop decision (policy.Disagg). Default 0: aggregated serving.
	PrefillEngines int
}

// Defaults for Config.
const (
	DefaultEngines   = 4
	DefaultBlockSize = 64
	// MaxEngines bounds a simulation's fleet; beyond it a replay of the
	// bundled trace no longer fits in a minute on two cores.
	MaxEngines = 1024
	// DefaultReportInterval is the mocker's heartbeat interval.
	DefaultReportInterval = 500 * time.Millisecond
	// DefaultMaxSessions is the node's bound on session bindings.
	DefaultMaxSessions = 1 << 16
)

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Engines == 0 {
		c.Engines = DefaultEngines
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.RateScale == 0 {
		c.RateScale = 1
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.ReportInterval == 0 {
		c.ReportInterval = DefaultReportInterval
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	c.Engine.BlockSize = c.BlockSize
	c.Engine.EnsureDefaults()
	if c.KV == nil {
		kv := policy.DefaultKVConfig()
		c.KV = &kv
	}
	if c.KVTTFT == nil {
		k := policy.DefaultKVTTFTConfig()
		c.KVTTFT = &k
	}
	return c
}

// Validate checks the configuration after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Engines < 1 || c.Engines > MaxEngines:
		return fmt.Errorf("%w: engines must be in [1, %d], got %d", ErrConfig, MaxEngines, c.Engines)
	case c.BlockSize < 1 || 512%c.BlockSize != 0:
		return fmt.Errorf("%w: block_size must divide 512, got %d", ErrConfig, c.BlockSize)
	case !(c.RateScale > 0) || c.RateScale > 1e6:
		return fmt.Errorf("%w: rate_scale must be in (0, 1e6], got %v", ErrConfig, c.RateScale)
	case c.PredictTTL < 0 || c.AffinityTTL < 0 || c.MaxSessions < 0:
		return fmt.Errorf("%w: predict_ttl, affinity_ttl and max_sessions must be >= 0", ErrConfig)
	case c.ApproxPolicy == index.PolicyLRU && !c.NoKVEvents:
		return fmt.Errorf("%w: approx_policy lru models the caches of approximate mode: it needs no_kv_events", ErrConfig)
	case c.OutputHints && !c.TrackOutputBlocks:
		return fmt.Errorf("%w: output_hints book expected output only with track_output_blocks", ErrConfig)
	case c.ReportInterval < 0:
		return fmt.Errorf("%w: report_interval must be > 0, got %v", ErrConfig, c.ReportInterval)
	case c.PrefillEngines < 0 || c.PrefillEngines >= c.Engines:
		return fmt.Errorf("%w: prefill_engines must be in [0, engines), leaving a decode engine; got %d of %d", ErrConfig, c.PrefillEngines, c.Engines)
	}
	if err := c.Engine.Validate(); err != nil {
		return fmt.Errorf("%w: engine: %w", ErrConfig, err)
	}
	if err := c.KV.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := c.KVTTFT.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return c.Thresholds.Validate()
}
