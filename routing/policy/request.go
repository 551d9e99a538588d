package policy

import (
	"fmt"
	"slices"

	"github.com/kvrouter/kvrouter/routing"
)

// Request is what the filters and selectors know of the request being
// routed.
type Request struct {
	// ISLTokens is the prompt length in tokens.
	ISLTokens int
	// BlockSize is the KV block size in tokens; it must be positive.
	BlockSize int
	// Pin, when set, names the exact worker (and rank) to dispatch to.
	Pin *Pin
	// Allowed, when not nil, restricts the candidates to these engines. A
	// pin must lie inside it.
	Allowed []routing.WorkerID
	// Overrides adjusts the KV cost model for this request only.
	Overrides Overrides
	// Thresholds, when set, replace the busy filter's thresholds for this
	// request (a model's runtime thresholds).
	Thresholds *Thresholds
}

// Pin is a request's exact target, e.g. from a worker-instance header or an
// external endpoint picker.
type Pin struct {
	Worker routing.WorkerID
	// Rank is the data-parallel rank; ignored when AnyRank is set.
	Rank uint32
	// AnyRank lets any rank of the worker serve the request.
	AnyRank bool
}

// matches reports whether w is the pinned worker (and rank).
func (p *Pin) matches(w routing.Worker) bool {
	return w.ID == p.Worker && (p.AnyRank || w.Rank == p.Rank)
}

// Validate checks the request's sizes and overrides.
func (r *Request) Validate() error {
	if r.ISLTokens < 0 {
		return fmt.Errorf("%w: isl %d < 0", ErrInvalidRequest, r.ISLTokens)
	}
	if r.BlockSize <= 0 {
		return fmt.Errorf("%w: block size %d <= 0", ErrInvalidRequest, r.BlockSize)
	}
	if err := r.Overrides.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return nil
}

// Blocks is the request's size in blocks, ceil(ISL / BlockSize), the
// denominator of the two-tier cache ratio and of the credit-decay excess.
// Rounding up follows the reference; it means a prompt with a partial tail
// block can never reach a cache ratio of 1.
func (r *Request) Blocks() int64 {
	bs := int64(max(r.BlockSize, 1))
	return (int64(max(r.ISLTokens, 0)) + bs - 1) / bs
}

// uncached is the request's prompt tokens not on the device of a candidate.
func (r *Request) uncached(o routing.Overlap) int64 {
	return max(0, int64(r.ISLTokens)-int64(o.Device)*int64(r.BlockSize))
}

// allows reports whether the allowed set admits engine id.
func (r *Request) allows(id routing.WorkerID) bool {
	return r.Allowed == nil || slices.Contains(r.Allowed, id)
}
