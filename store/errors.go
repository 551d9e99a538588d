package store

import "errors"

// The package's sentinel errors. Callers test them with errors.Is; every
// error that crosses the package boundary wraps one of them, or wraps an
// error from Pebble or the file system with context.
var (
	// ErrNotFound reports a point lookup of an FSM key that does not exist.
	ErrNotFound = errors.New("store: not found")

	// ErrCorrupt is the class of every error caused by bytes that do not
	// decode: a log entry, an FSM record or a snapshot stream. Corruption is
	// never retried; the caller stops the node or rejects the snapshot.
	ErrCorrupt = errors.New("store: corrupt")

	// ErrClosed reports a call on a store that has been closed.
	ErrClosed = errors.New("store: closed")

	// ErrInvalidOptions reports an Options value that failed Validate.
	ErrInvalidOptions = errors.New("store: invalid options")

	// ErrInvalidArgument reports a write whose arguments are outside the
	// documented domain (an empty tier mask, an oversized session key).
	ErrInvalidArgument = errors.New("store: invalid argument")

	// ErrIndexRegressed reports a batch commit whose applied index is not
	// above the index already applied. Applying it would break the rule that
	// the stored applied index covers exactly the data beside it.
	ErrIndexRegressed = errors.New("store: applied index regressed")

	// ErrUnsupported reports a format version this build cannot read: a
	// snapshot or an FSM directory written by a newer release.
	ErrUnsupported = errors.New("store: unsupported format version")

	// ErrDiskFull reports a write refused because the store's file system
	// has less free space than Options.MinFreeBytes. Nothing was written;
	// the same write succeeds once space returns.
	ErrDiskFull = errors.New("store: disk full")

	// ErrStaleBatch reports a batch committed after a Restore replaced the
	// state it was built against.
	ErrStaleBatch = errors.New("store: batch predates restore")
)

// stableNotFoundText is the exact text hashicorp/raft compares against when
// it reads a missing stable key (api.go, raft.go). It must not change.
const stableNotFoundText = "not found"

// errStableNotFound is returned by Get and GetUint64 for a missing key. raft
// compares err.Error() with "not found" rather than using errors.Is, so the
// text is the contract.
var errStableNotFound = errors.New(stableNotFoundText)
