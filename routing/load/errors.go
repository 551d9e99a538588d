package load

import "errors"

// Errors returned by the tracker. They are wrapped with the offending value
// as context; test them with errors.Is.
var (
	// ErrInvalidConfig is returned by Config.Validate and New.
	ErrInvalidConfig = errors.New("load: invalid config")
	// ErrInvalidRequest is returned for a request whose sizes are negative
	// or inconsistent, or whose id is empty.
	ErrInvalidRequest = errors.New("load: invalid request")
	// ErrDuplicateRequest is returned by Add for an id that is already
	// active: booking it twice would count its load twice.
	ErrDuplicateRequest = errors.New("load: duplicate request id")
	// ErrUnknownRequest is returned for a lifecycle call on an id that is not
	// active (never added, already freed or expired).
	ErrUnknownRequest = errors.New("load: unknown request id")
)
