package index

import "errors"

// Errors returned by the indexes. Callers compare with errors.Is; the
// returned errors wrap these sentinels with the worker and event ids.
var (
	// ErrStale is returned for an event whose id is not above the worker's
	// cursor: a duplicate delivery. The event is ignored.
	ErrStale = errors.New("index: stale event id")
	// ErrGap is returned for an event whose id skips past cursor+1. Nothing
	// of it is applied and the cursor stays; the caller must resync the
	// worker (ReplaceWorker).
	ErrGap = errors.New("index: event id gap")
	// ErrUnknownParent is returned for a stored event whose parent block is
	// not known for its worker. None of the event's blocks are placed; the
	// event id is consumed.
	ErrUnknownParent = errors.New("index: unknown parent block")
	// ErrTooManyWorkers is returned when a new worker would exceed the
	// number of worker slots an owner word can encode.
	ErrTooManyWorkers = errors.New("index: too many workers")
	// ErrUnknownWorker is returned by the LRU approximate index for a worker
	// whose capacity was never declared with SetWorker.
	ErrUnknownWorker = errors.New("index: unknown worker")
	// ErrUnknownLease is returned by Release for a lease that is not active.
	ErrUnknownLease = errors.New("index: unknown lease")
	// ErrConfig is returned by Validate for an invalid configuration field.
	ErrConfig = errors.New("index: invalid config")
)
