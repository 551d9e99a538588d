package index

import (
	"fmt"
	"time"
)

// Policy selects how the approximate index forgets blocks.
type Policy uint8

// Policies.
const (
	// PolicyTTL forgets a block TTL after it was last recorded, and prunes
	// the soonest-expiring blocks when the index is over MaxBlocks.
	PolicyTTL Policy = iota
	// PolicyLRU models each worker's advertised capacity (SetWorker):
	// blocks of active requests stay, and when a worker is over capacity
	// its least-recently-released unreferenced blocks go first.
	PolicyLRU
)

// String names the policy as configuration spells it.
func (p Policy) String() string {
	switch p {
	case PolicyTTL:
		return "ttl"
	case PolicyLRU:
		return "lru"
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// ParsePolicy reads a policy as configuration spells it ("ttl", "lru").
func ParsePolicy(s string) (Policy, error) {
	for _, p := range []Policy{PolicyTTL, PolicyLRU} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: approximate cache policy %q: want ttl or lru", ErrConfig, s)
}

// Defaults of ApproxConfig.
const (
	// DefaultTTL is how long a recorded block is assumed to stay cached:
	// two minutes outlives most engines' prefix-cache residency under load,
	// so the index errs towards remembering.
	DefaultTTL = 120 * time.Second
	// DefaultSideTTL is the predict-on-route side index's TTL: long enough
	// to cover the burst of sibling requests (best-of-N, parallel sampling)
	// that follows a routing decision, short enough that the event-fed
	// exact index has caught up by then.
	DefaultSideTTL = 5 * time.Second
	// DefaultMaxBlocks bounds the TTL index at 2^20 (worker, block)
	// entries, about 100 MiB at worst, so that a flood of unique prompts
	// cannot grow it without limit.
	DefaultMaxBlocks = 1 << 20
	// DefaultPruneTarget is the fraction of MaxBlocks a prune shrinks the
	// index to: pruning to 80% rather than to 100% amortizes one prune over
	// many records.
	DefaultPruneTarget = 0.8
)

// ApproxConfig configures an approximate index. Zero fields take their
// defaults (see EnsureDefaults).
type ApproxConfig struct {
	// Policy is PolicyTTL (default) or PolicyLRU.
	Policy Policy
	// TTL is how long a block stays after it was last recorded (PolicyTTL).
	TTL time.Duration
	// MaxBlocks bounds the number of (worker, block) entries (PolicyTTL).
	MaxBlocks int
	// PruneTarget is the fraction of MaxBlocks kept after a prune, in
	// (0, 1] (PolicyTTL).
	PruneTarget float64
}

// EnsureDefaults returns c with zero fields set to their defaults.
func (c ApproxConfig) EnsureDefaults() ApproxConfig {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.MaxBlocks == 0 {
		c.MaxBlocks = DefaultMaxBlocks
	}
	if c.PruneTarget == 0 {
		c.PruneTarget = DefaultPruneTarget
	}
	return c
}

// Validate reports the first invalid field, naming it.
func (c ApproxConfig) Validate() error {
	switch {
	case c.Policy != PolicyTTL && c.Policy != PolicyLRU:
		return fmt.Errorf("%w: ApproxConfig.Policy: unknown policy %d", ErrConfig, c.Policy)
	case c.TTL <= 0:
		return fmt.Errorf("%w: ApproxConfig.TTL: must be positive, got %v", ErrConfig, c.TTL)
	case c.MaxBlocks <= 0:
		return fmt.Errorf("%w: ApproxConfig.MaxBlocks: must be positive, got %d", ErrConfig, c.MaxBlocks)
	case !(c.PruneTarget > 0 && c.PruneTarget <= 1):
		return fmt.Errorf("%w: ApproxConfig.PruneTarget: must be in (0, 1], got %v", ErrConfig, c.PruneTarget)
	}
	return nil
}
