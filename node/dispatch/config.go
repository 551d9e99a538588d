package dispatch

import (
	"cmp"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/load"
	"github.com/kvrouter/kvrouter/routing/policy"
	"github.com/kvrouter/kvrouter/routing/policyclass"
)

// Limits and defaults of Config. Each comment says why the value is what
// it is.
const (
	// DefaultPolicy is the KV cost model: the point of the router is to
	// weigh cached prefixes against load.
	DefaultPolicy = policy.NameKV

	// DefaultMaxPromptTokens is 1Mi tokens, the largest context current
	// models offer (the frontend's edge limit is the same): a longer prompt
	// cannot be served by any engine, so refusing it saves the hashing.
	DefaultMaxPromptTokens = 1 << 20

	// TextBytesPerToken converts a text prompt's length to an estimated
	// token count, for the prompt limit and the load projection; see
	// policy.TextBytesPerToken.
	TextBytesPerToken = policy.TextBytesPerToken

	// MaxSessionIDBytes bounds session ids: see policy.MaxSessionKeyBytes.
	MaxSessionIDBytes = policy.MaxSessionKeyBytes

	// DefaultMaxSessions bounds the live session bindings (65,536, the
	// reference bound): each binding costs a few hundred bytes, so the
	// bound caps the table near 20 MiB whatever clients send.
	DefaultMaxSessions = 1 << 16

	// MinAffinityTTL and MaxAffinityTTL are the valid range of a non-zero
	// AffinityTTL (1 s to one year, the reference range): shorter would
	// expire between the turns of any conversation; longer is a leak.
	MinAffinityTTL = time.Second
	MaxAffinityTTL = 365 * 24 * time.Hour

	// DefaultExpireInterval is how often, at most, Route sweeps the load
	// trackers for requests whose completion never arrived; see
	// policy.DefaultExpireInterval.
	DefaultExpireInterval = policy.DefaultExpireInterval

	// DefaultSuspectTimeout is how long an engine that a request could not
	// reach is left out of selection; see policy.DefaultSuspectTimeout. The
	// node sets it to its own liveness timeout.
	DefaultSuspectTimeout = policy.DefaultSuspectTimeout

	// maxBlockSize bounds an explicit block size as the card decoder does.
	maxBlockSize = 1 << 16
)

// Config configures a Dispatcher. Start from DefaultConfig: the zero value
// of the KV knobs turns prefill tracking off. Keys in error messages are
// the configuration keys of each field.
type Config struct {
	// Policy names the selector (policy): "kv", "two-tier", "round-robin",
	// "random", "power-of-two", "least-loaded", "device-aware-weighted" or
	// "direct", or a short name of one ("rr", "p2c": policy.Canonical),
	// which EnsureDefaults replaces by the name. Default "kv".
	Policy string
	// BlockSize is the KV block size in tokens (block_size). Default 0:
	// taken from the engines' cards, per model; ranks whose card disagrees
	// with the first rank of their model are not candidates. A non-zero
	// value overrides the cards and excludes every rank that differs.
	BlockSize int
	// MaxPromptTokens refuses longer prompts with ErrPromptTooLong
	// (max_prompt_tokens). Text prompts count len/TextBytesPerToken.
	// Default DefaultMaxPromptTokens.
	MaxPromptTokens int
	// AffinityTTL is the idle time after which a session binding expires
	// (affinity_ttl). 0 disables session affinity (the default); otherwise
	// it must lie in [MinAffinityTTL, MaxAffinityTTL].
	AffinityTTL time.Duration
	// AffinityMode is AffinityHard (default) or AffinitySoft
	// (affinity_mode). See the package documentation.
	AffinityMode AffinityMode
	// MaxSessions bounds the live bindings (max_sessions); a new session
	// beyond it is refused with ErrSessionLimit. Default 65,536.
	MaxSessions int
	// Thresholds are the busy thresholds (busy.*): busy workers are not
	// selected, and a soft binding to a busy worker is not followed.
	// Default: none set.
	Thresholds policy.Thresholds
	// KV, TwoTier and DeviceAware configure their selectors (kv.*,
	// two_tier.*, device_aware.*). Defaults: the policy package's.
	KV          policy.KVConfig
	TwoTier     policy.TwoTierConfig
	DeviceAware policy.DeviceAwareConfig
	// ApproximateMode routes token prompts with the dispatcher's own
	// approximate index instead of the event-fed exact one, for engines
	// that publish no KV events (approximate_mode). Default off.
	ApproximateMode bool
	// ApproxTTL is how long the approximate index assumes a routed prompt
	// stays cached (approx_ttl). Default 0: index.DefaultTTL (120 s).
	ApproxTTL time.Duration
	// ApproxPolicy is how the approximate index forgets (approx_policy):
	// index.PolicyTTL (default) after ApproxTTL, or index.PolicyLRU, which
	// models each engine rank's cache at its advertised capacity and keeps
	// the blocks of requests in flight. LRU needs ApproximateMode.
	ApproxPolicy index.Policy
	// PredictTTL enables the predict-on-route side index with this TTL
	// (predict_ttl): a decision is assumed cached on its worker until the
	// engine's events catch up. Default 0 (off). It has no effect in
	// approximate mode, where every decision is recorded anyway, so the
	// combination is refused.
	PredictTTL time.Duration
	// MaxRequestAge frees a request whose completion never arrived after
	// this long (active_request_expiry). Default 300 s; 0 disables it.
	MaxRequestAge time.Duration
	// ExpireInterval rate-limits the expiry sweep (expire_interval).
	// Default 60 s.
	ExpireInterval time.Duration
	// SuspectTimeout is how long an engine that could not be reached (a
	// refused or timed-out connection, reported through Decision.Done with
	// ErrEngineUnreachable) gets no request. Default 3 s; the node uses its
	// liveness timeout.
	SuspectTimeout time.Duration
	// Seed seeds the selectors' random generator (seed), so that equal
	// inputs make equal decisions. Default 0, itself a fixed seed.
	Seed uint64
	// TrackingKey, when set, books active requests under keyed tracking
	// identities (tracking_hash keyed-xxh3-v1) instead of the public block
	// hashes; see trackHash (route.go). Default nil: public-xxh3-v1.
	TrackingKey *routing.TrackingKey
	// Tracking switches the load tracker's toggles (tracking.*): KV reuse,
	// prefill tokens, output blocks. Default: the reference's.
	Tracking policy.Tracking
	// Now is the clock: decision times, expiry and the overhead metrics.
	// Default time.Now. Tests inject a fake clock.
	Now func() time.Time
	// Queue configures the admission queue (queue.go); off by default.
	Queue QueueConfig
	// DecodeFallback serves a model's requests whole on its decode engines
	// (and aggregated ones) when it has no prefill engine left (none
	// registered, or every one unreachable), as the reference router does
	// once its prefill workers are gone (decode_fallback). Off, such a
	// request gets ErrNoEngine. Default on (DefaultConfig).
	DecodeFallback bool
}

// DefaultConfig returns every default: the kv policy, block sizes from the
// cards, affinity off.
func DefaultConfig() Config {
	return Config{
		Policy:          DefaultPolicy,
		MaxPromptTokens: DefaultMaxPromptTokens,
		MaxSessions:     DefaultMaxSessions,
		KV:              policy.DefaultKVConfig(),
		TwoTier:         policy.DefaultTwoTierConfig(),
		DeviceAware:     policy.DefaultDeviceAwareConfig(),
		MaxRequestAge:   load.DefaultMaxRequestAge,
		ExpireInterval:  DefaultExpireInterval,
		SuspectTimeout:  DefaultSuspectTimeout,
		Now:             time.Now,
		DecodeFallback:  true,
	}
}

// EnsureDefaults returns c with the fields whose zero value means "unset"
// (Policy, MaxPromptTokens, MaxSessions, ExpireInterval, SuspectTimeout,
// Now, and the selector configurations when wholly zero, which no selector
// can use) defaulted. Fields whose zero value is meaningful (MaxRequestAge,
// single KV knobs) are left alone.
func (c Config) EnsureDefaults() Config {
	d := DefaultConfig()
	c.Policy = cmp.Or(c.Policy, d.Policy)
	if p := policy.Canonical(c.Policy); p != "" {
		c.Policy = p // an alias ("rr") names its selector from here on
	}
	c.MaxPromptTokens = cmp.Or(c.MaxPromptTokens, d.MaxPromptTokens)
	c.MaxSessions = cmp.Or(c.MaxSessions, d.MaxSessions)
	c.ExpireInterval = cmp.Or(c.ExpireInterval, d.ExpireInterval)
	c.SuspectTimeout = cmp.Or(c.SuspectTimeout, d.SuspectTimeout)
	if c.Now == nil {
		c.Now = d.Now
	}
	c.KV = cmp.Or(c.KV, d.KV)
	c.TwoTier = cmp.Or(c.TwoTier, d.TwoTier)
	c.DeviceAware = cmp.Or(c.DeviceAware, d.DeviceAware)
	return c
}

// Validate reports the first invalid field, naming its key.
func (c Config) Validate() error {
	for _, check := range []func() error{c.validateCore, c.validateAffinity, c.validateIndexes, c.validatePolicy} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateCore checks the prompt and block limits.
func (c Config) validateCore() error {
	switch {
	case policy.Canonical(c.Policy) == "":
		return configError("policy: unknown %q (known: %v, or the short names %v)", c.Policy, policy.Names(), policy.Aliases())
	case c.BlockSize < 0 || c.BlockSize > maxBlockSize:
		return configError("block_size: must be in 0..%d, got %d", maxBlockSize, c.BlockSize)
	case c.MaxPromptTokens <= 0:
		return configError("max_prompt_tokens: must be > 0, got %d", c.MaxPromptTokens)
	case c.SuspectTimeout < 0:
		return configError("suspect_timeout: must be > 0, got %v", c.SuspectTimeout)
	case c.Now == nil:
		return configError("now: a clock is required")
	}
	return nil
}

// validateAffinity checks the session affinity keys.
func (c Config) validateAffinity() error {
	switch {
	case c.AffinityTTL != 0 && (c.AffinityTTL < MinAffinityTTL || c.AffinityTTL > MaxAffinityTTL):
		return configError("affinity_ttl: must be 0 (off) or in [%v, %v], got %v", MinAffinityTTL, MaxAffinityTTL, c.AffinityTTL)
	case c.AffinityMode != AffinityHard && c.AffinityMode != AffinitySoft:
		return configError("affinity_mode: must be hard or soft, got %d", c.AffinityMode)
	case c.MaxSessions <= 0:
		return configError("max_sessions: must be > 0, got %d", c.MaxSessions)
	}
	return nil
}

// validateIndexes checks the approximate and side index keys and expiry.
func (c Config) validateIndexes() error {
	switch {
	case c.ApproxTTL < 0:
		return configError("approx_ttl: must be >= 0, got %v", c.ApproxTTL)
	case c.PredictTTL < 0:
		return configError("predict_ttl: must be >= 0, got %v", c.PredictTTL)
	case c.ApproxPolicy != index.PolicyTTL && c.ApproxPolicy != index.PolicyLRU:
		return configError("approx_policy: unknown policy %v", c.ApproxPolicy)
	case c.ApproxPolicy == index.PolicyLRU && !c.ApproximateMode:
		return configError("approx_policy: lru models the caches of approximate_mode; with KV events it has no effect")
	case c.PredictTTL > 0 && c.ApproximateMode:
		return configError("predict_ttl: has no effect with approximate_mode, which records every decision")
	case c.MaxRequestAge < 0:
		return configError("active_request_expiry: must be >= 0, got %v", c.MaxRequestAge)
	case c.ExpireInterval <= 0:
		return configError("expire_interval: must be > 0, got %v", c.ExpireInterval)
	}
	return nil
}

// validatePolicy checks the selector knobs and busy thresholds, whose
// errors already name their keys.
func (c Config) validatePolicy() error {
	for _, err := range []error{c.Thresholds.Validate(), c.KV.Validate(), c.TwoTier.Validate(), c.DeviceAware.Validate()} {
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	return nil
}

// configError wraps ErrInvalidConfig with a message naming a key.
func configError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// Defaults of QueueConfig.
const (
	// DefaultQueuePoll is how often a queued request re-checks for free
	// capacity when nothing this node did freed any: load reported by
	// engines (other routers' requests) changes without telling us. 25 ms
	// is well under a prefill, and costs one candidate scan per model.
	DefaultQueuePoll = 25 * time.Millisecond
	// DefaultRetryAfter is the Retry-After advice of a queue refusal: about
	// one prefill's time, after which a busy fleet may have room.
	DefaultRetryAfter = time.Second
)

// QueueConfig configures the admission queue (see queue.go). The queue is
// off unless Policy is set, as in the reference.
type QueueConfig struct {
	// Policy is the policy-class configuration (router_policy_config and
	// the router_queue_* keys); nil turns the queue off.
	Policy *policyclass.Config
	// Poll is how often a waiting request re-checks for capacity (default
	// DefaultQueuePoll).
	Poll time.Duration
	// RetryAfter is the advice sent with a refusal (default
	// DefaultRetryAfter).
	RetryAfter time.Duration
}

// withDefaults fills the zero durations.
func (c QueueConfig) withDefaults() QueueConfig {
	if c.Poll <= 0 {
		c.Poll = DefaultQueuePoll
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	return c
}
