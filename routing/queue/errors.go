package queue

import (
	"errors"
	"fmt"
)

// Errors of the queue; test them with errors.Is.
var (
	// ErrLimit: a class's queue limit is reached; the request is refused
	// (the edge answers 529 with Retry-After).
	ErrLimit = errors.New("queue: policy class queue limit reached")
	// ErrInvalid: an item or a configuration the queue cannot take.
	ErrInvalid = errors.New("queue: invalid")
)

// Limit names one of a class's queue limits.
type Limit string

// The limits, named as their configuration keys.
const (
	LimitRequests     Limit = "request_queue_limit_per_worker"
	LimitRawISLTokens Limit = "raw_isl_token_queue_limit_per_worker"
	LimitCachedTokens Limit = "cached_token_queue_limit_per_worker"
)

// LimitError is a refusal by a class limit, with what the structured 529
// body reports.
type LimitError struct {
	// Class is the physical class's name.
	Class string
	// Limit is the limit that was reached.
	Limit Limit
	// PerWorker is the configured value, Workers the worker count it was
	// scaled by, and Effective their product.
	PerWorker, Effective int64
	Workers              int
	// Pending is the class's current total of the limited quantity.
	Pending int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("queue: policy class %q: %s reached (%d pending, effective limit %d = %d x %d workers)",
		e.Class, e.Limit, e.Pending, e.Effective, e.PerWorker, e.Workers)
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }
