package producer

import "errors"

// Sentinel errors of the package, matched with errors.Is. A Feed ends with
// exactly one of ErrLagged, ErrProducerChanged, ErrResync or ErrClosed.
var (
	// ErrInvalidPool is returned for a malformed PoolID.
	ErrInvalidPool = errors.New("producer: invalid pool identity")
	// ErrConfig is returned for a Config that fails validation.
	ErrConfig = errors.New("producer: invalid config")
	// ErrInvalidChange is returned for a batch with a change of unknown kind
	// or without a worker; nothing of the batch is applied.
	ErrInvalidChange = errors.New("producer: invalid change")
	// ErrStaleBatch is returned for a batch whose index is not above the
	// last applied one (a replay); nothing of it is applied.
	ErrStaleBatch = errors.New("producer: stale batch")
	// ErrLagged ends a feed whose queue was full when an update arrived.
	// Client action: subscribe again, which starts from a snapshot.
	ErrLagged = errors.New("producer: subscriber lagged")
	// ErrProducerChanged ends every feed when the producer's epoch changes
	// (a rebuild, or a replacement producer). Client action: subscribe
	// again at once.
	ErrProducerChanged = errors.New("producer: producer changed")
	// ErrResync ends every feed when one publication is too large to ship
	// as a delta. Client action: subscribe again at once.
	ErrResync = errors.New("producer: delta too large, snapshot required")
	// ErrClosed is returned by a closed producer and ends its feeds.
	ErrClosed = errors.New("producer: closed")
)
