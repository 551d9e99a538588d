package policy

// TwoTierConfig configures the two-tier selector.
type TwoTierConfig struct {
	// CacheThreshold is the cached fraction of the request above which
	// (strictly) the cache tier decides (cache_threshold), in [0, 1].
	// Default 0.5.
	CacheThreshold float64
	// BalanceAbsThreshold is the spread of active requests, max minus min,
	// above which load balance overrides cache affinity
	// (balance_abs_threshold). Default 32.
	BalanceAbsThreshold int64
	// BalanceRelThreshold is the ratio max/min of active requests that must
	// also be exceeded for the load tier (balance_rel_threshold), >= 1.
	// Default 1.1.
	BalanceRelThreshold float64
	// HostCacheWeight weighs the host-memory run after the device prefix in
	// the cache tier's score (host_cache_weight), in [0, 1]. Default 0.75,
	// the KV selector's host_cache_hit_weight.
	HostCacheWeight float64
}

// DefaultTwoTierConfig returns the reference defaults.
func DefaultTwoTierConfig() TwoTierConfig {
	return TwoTierConfig{CacheThreshold: 0.5, BalanceAbsThreshold: 32, BalanceRelThreshold: 1.1, HostCacheWeight: 0.75}
}

// Validate reports the first invalid parameter, naming its key.
func (c TwoTierConfig) Validate() error {
	if err := checkRange("cache_threshold", c.CacheThreshold, 1); err != nil {
		return err
	}
	if c.BalanceAbsThreshold < 0 {
		return configError("balance_abs_threshold must be >= 0, got %d", c.BalanceAbsThreshold)
	}
	if !(c.BalanceRelThreshold >= 1) || c.BalanceRelThreshold > 1e300 {
		return configError("balance_rel_threshold must be >= 1.0 and finite, got %v", c.BalanceRelThreshold)
	}
	return checkRange("host_cache_weight", c.HostCacheWeight, 1)
}

// TwoTier is the two-tier cost function: when active requests are badly
// unbalanced (both thresholds exceeded) it picks the least loaded worker;
// otherwise, when the best weighted cached fraction of the request exceeds
// CacheThreshold, the least loaded worker among those holding that best
// prefix; otherwise the least loaded worker. "Least loaded" means fewest
// active requests, ties going to the earliest candidate. It is stateless and
// safe for concurrent use.
type TwoTier struct {
	cfg TwoTierConfig
}

var _ Selector = (*TwoTier)(nil)

// NewTwoTier returns a two-tier selector or an error wrapping
// ErrInvalidConfig.
func NewTwoTier(cfg TwoTierConfig) (*TwoTier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &TwoTier{cfg: cfg}, nil
}

// Name implements Selector.
func (*TwoTier) Name() string { return NameTwoTier }

// Select implements Selector; d.Reason is "load", "cache" or
// "least-loaded".
func (s *TwoTier) Select(d *Decision, req *Request, cands []Candidate) error {
	if err := d.start(cands); err != nil {
		return err
	}
	if s.unbalanced(cands) {
		d.choose(cands, leastLoaded(cands, nil), "load")
		return nil
	}
	best := s.bestScore(cands)
	if blocks := req.Blocks(); blocks > 0 && best/float64(blocks) > s.cfg.CacheThreshold {
		d.choose(cands, leastLoaded(cands, func(c *Candidate) bool { return s.score(c) == best }), "cache")
		return nil
	}
	d.choose(cands, leastLoaded(cands, nil), "least-loaded")
	return nil
}

// unbalanced reports whether both balance thresholds are exceeded.
func (s *TwoTier) unbalanced(cands []Candidate) bool {
	lo, hi := cands[0].Load.ActiveRequests, cands[0].Load.ActiveRequests
	for i := range cands {
		lo, hi = min(lo, cands[i].Load.ActiveRequests), max(hi, cands[i].Load.ActiveRequests)
	}
	return hi-lo > s.cfg.BalanceAbsThreshold && float64(hi) > s.cfg.BalanceRelThreshold*float64(lo)
}

// score is a candidate's cached prefix in blocks, host blocks weighted.
func (s *TwoTier) score(c *Candidate) float64 {
	return float64(c.Overlap.Device) + s.cfg.HostCacheWeight*float64(c.Overlap.Host)
}

// bestScore is the highest score among the candidates.
func (s *TwoTier) bestScore(cands []Candidate) float64 {
	best := s.score(&cands[0])
	for i := range cands {
		best = max(best, s.score(&cands[i]))
	}
	return best
}

// leastLoaded returns the first candidate with the fewest active requests
// among those keep accepts (every one when keep is nil), -1 for none.
func leastLoaded(cands []Candidate, keep func(*Candidate) bool) int {
	best := -1
	for i := range cands {
		if keep != nil && !keep(&cands[i]) {
			continue
		}
		if best < 0 || cands[i].Load.ActiveRequests < cands[best].Load.ActiveRequests {
			best = i
		}
	}
	return best
}
