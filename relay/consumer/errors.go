package consumer

import "errors"

// Sentinel errors of the package.
var (
	// ErrConfig is returned for a Config that fails validation.
	ErrConfig = errors.New("consumer: invalid config")
	// ErrDuplicateLane is returned when a lane for the pool exists.
	ErrDuplicateLane = errors.New("consumer: lane exists")
	// ErrClosed is returned by a closed consumer.
	ErrClosed = errors.New("consumer: closed")
	// ErrApply is returned (and the lane resubscribes) when a validated
	// delta does not extend the lane's filter.
	ErrApply = errors.New("consumer: delta does not apply")
)
