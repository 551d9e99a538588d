package policy

import (
	"fmt"
	"math"
)

// Thresholds are the busy thresholds: a worker over any of them is excluded
// from selection. A nil field is unset. They compare the candidate's Active
// load (without the request) with its advertised capacity.
type Thresholds struct {
	// ActiveDecodeBlocks is a fraction in [0, 1] of the worker's
	// TotalBlocks: above it, the worker's KV cache is too full to take more
	// (active-decode-blocks-threshold). Workers advertising no capacity are
	// never busy by this rule.
	ActiveDecodeBlocks *float64
	// ActivePrefillTokens is an absolute number of active prefill tokens
	// (active-prefill-tokens-threshold).
	ActivePrefillTokens *int64
	// ActivePrefillTokensFrac is a multiple of the worker's
	// MaxBatchedTokens (active-prefill-tokens-threshold-frac). Either
	// prefill threshold makes the worker busy (OR semantics).
	ActivePrefillTokensFrac *float64
}

// Validate reports the first invalid threshold, naming its key.
func (t Thresholds) Validate() error {
	if v := t.ActiveDecodeBlocks; v != nil && !(*v >= 0 && *v <= 1) {
		return configError("active_decode_blocks_threshold must be in [0, 1], got %v", *v)
	}
	if v := t.ActivePrefillTokens; v != nil && *v < 0 {
		return configError("active_prefill_tokens_threshold must be >= 0, got %d", *v)
	}
	if v := t.ActivePrefillTokensFrac; v != nil && !(*v >= 0 && !math.IsInf(*v, 1)) {
		return configError("active_prefill_tokens_threshold_frac must be finite and >= 0, got %v", *v)
	}
	return nil
}

// Busy reports whether the candidate is over any threshold.
func (t Thresholds) Busy(c *Candidate) bool {
	a := c.Active
	if v := t.ActiveDecodeBlocks; v != nil && c.Info.TotalBlocks > 0 &&
		float64(a.DecodeBlocks) > *v*float64(c.Info.TotalBlocks) {
		return true
	}
	if v := t.ActivePrefillTokens; v != nil && a.PrefillTokens > *v {
		return true
	}
	return t.ActivePrefillTokensFrac != nil && c.Info.MaxBatchedTokens > 0 &&
		float64(a.PrefillTokens) > *t.ActivePrefillTokensFrac*float64(c.Info.MaxBatchedTokens)
}

// BusyFilter drops busy candidates. Run it last: its errors mean the
// candidates were compatible but loaded.
type BusyFilter struct {
	Thresholds Thresholds
}

var _ Filter = (*BusyFilter)(nil)

// Name implements Filter.
func (*BusyFilter) Name() string { return "busy" }

// Filter implements Filter. When every candidate is busy it returns
// ErrPinnedWorkerOverloaded for a pinned request (which is not rerouted)
// and ErrAllWorkersOverloaded otherwise.
func (f *BusyFilter) Filter(dst []Candidate, req *Request, cands []Candidate) ([]Candidate, error) {
	n := len(dst)
	th := &f.Thresholds
	if req.Thresholds != nil {
		th = req.Thresholds
	}
	for i := range cands {
		if !th.Busy(&cands[i]) {
			dst = append(dst, cands[i])
		}
	}
	switch {
	case len(dst) > n || len(cands) == 0:
		return dst, nil
	case req.Pin != nil:
		return dst, fmt.Errorf("%w: worker %d", ErrPinnedWorkerOverloaded, req.Pin.Worker)
	default:
		return dst, fmt.Errorf("%w: %d busy", ErrAllWorkersOverloaded, len(cands))
	}
}
