package policy

import (
	"errors"
	"fmt"
)

// Errors returned by filters, selectors and constructors. They are wrapped
// with context; test them with errors.Is.
var (
	// ErrInvalidConfig is returned by the Validate methods and constructors;
	// the message names the offending configuration key.
	ErrInvalidConfig = errors.New("policy: invalid config")
	// ErrInvalidRequest is returned for a request or candidate with negative
	// or inconsistent sizes.
	ErrInvalidRequest = errors.New("policy: invalid request")
	// ErrNoCompatibleWorker means no candidate passed the compatibility
	// filters (or there were none): the request cannot be served here at all.
	ErrNoCompatibleWorker = errors.New("policy: no compatible worker")
	// ErrAllWorkersOverloaded means compatible workers exist but all are
	// over a busy threshold: the request may succeed later.
	ErrAllWorkersOverloaded = errors.New("policy: all eligible workers overloaded")
	// ErrPinnedWorkerOverloaded means the request's pinned worker is busy.
	// A pin is exact dispatch, so the request is not rerouted.
	ErrPinnedWorkerOverloaded = errors.New("policy: pinned worker overloaded")
	// ErrPinnedWorkerNotFound means the pinned worker is not among the
	// candidates (unknown, or outside the allowed set).
	ErrPinnedWorkerNotFound = errors.New("policy: pinned worker not found")
	// ErrPinnedRankOutOfRange means the pinned worker exists but has no
	// candidate with the pinned data-parallel rank.
	ErrPinnedRankOutOfRange = errors.New("policy: pinned rank out of range")
	// ErrNoPinnedWorker is returned by the direct selector for a request
	// that names no worker.
	ErrNoPinnedWorker = errors.New("policy: direct routing without a pinned worker")
	// ErrUnknownPolicy is matched by every *UnknownPolicyError.
	ErrUnknownPolicy = errors.New("policy: unknown policy")
	// ErrSessionLimit means a new session would exceed the bound on
	// session bindings, or a session id is over MaxSessionKeyBytes.
	ErrSessionLimit = errors.New("policy: session limit")
	// ErrNoPrefillWorker means a model with decode workers has no prefill
	// worker left (none registered, or every one unreachable) and may not
	// be served whole on its decode workers: the request cannot be served
	// here now.
	ErrNoPrefillWorker = errors.New("policy: no prefill worker")
	// ErrSessionStore wraps an unexpected failure of the session store
	// (Bindings) on the decision path.
	ErrSessionStore = errors.New("policy: session store failure")
)

// UnknownPolicyError is returned by New for a name no selector is registered
// under. An unknown policy is a startup failure, never a silent fallback.
type UnknownPolicyError struct {
	// Name is the name that was asked for.
	Name string
}

// Error names the unknown policy and lists the known ones.
func (e *UnknownPolicyError) Error() string {
	return fmt.Sprintf("policy: unknown policy %q (known: %v)", e.Name, Names())
}

// Is makes errors.Is(err, ErrUnknownPolicy) true.
func (e *UnknownPolicyError) Is(target error) bool { return target == ErrUnknownPolicy }

// configError wraps ErrInvalidConfig with a message naming a key.
func configError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}
