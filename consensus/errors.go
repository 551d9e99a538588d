package consensus

import "errors"

// Errors of the consensus layer. Callers compare with errors.Is; returned
// errors wrap these sentinels with context (and, for ErrIndeterminate, the
// raft or transport cause).
var (
	// ErrInvalidConfig is returned by Config.Validate and New; the message
	// names the configuration key.
	ErrInvalidConfig = errors.New("consensus: invalid config")
	// ErrBadCommand is returned for a command that cannot be encoded or
	// fails validation before it is proposed. Nothing was proposed.
	ErrBadCommand = errors.New("consensus: bad command")
	// ErrTooLarge is returned for an encoded command over
	// Config.MaxCommandBytes. Nothing was proposed.
	ErrTooLarge = errors.New("consensus: command too large")
	// ErrIndeterminate is returned when a proposed command may or may not
	// have been committed: the apply timed out, leadership was lost, or the
	// forwarding call failed after it was sent. Retry with the same request
	// id; the FSM answers a retried request id with its first result.
	ErrIndeterminate = errors.New("consensus: outcome indeterminate")
	// ErrNoLeader is returned when no leader is known or the leader cannot
	// be reached before the call is sent. Nothing was proposed.
	ErrNoLeader = errors.New("consensus: no leader")
	// ErrNotReady is returned by a leader that has not passed its barrier
	// yet: it does not serve binds until it has applied every entry of the
	// previous terms. Nothing was proposed; retry shortly.
	ErrNotReady = errors.New("consensus: leader not ready")
	// ErrForwardLoop is returned when a forwarded call reaches a node that
	// is not the leader: a call is forwarded at most once.
	ErrForwardLoop = errors.New("consensus: forwarded call reached a follower")
	// ErrUnauthorized is returned for a call the cluster API refused: a
	// forwarded command from a non-member, a membership change without an
	// operator credential, a member of another DC. Nothing was proposed.
	ErrUnauthorized = errors.New("consensus: caller not authorized")
	// ErrHalted is the corruption class: the FSM met an entry it cannot
	// decode, which means nodes may diverge, and it applies nothing more.
	// The node must be restored from a snapshot of a healthy peer.
	ErrHalted = errors.New("consensus: FSM halted on an undecodable entry")
	// ErrSessionLimit is returned by Bind when a new key would exceed the
	// bound on bindings.
	ErrSessionLimit = errors.New("consensus: session limit reached")
	// ErrBadSnapshot is returned by Restore for a snapshot stream it cannot
	// read; the FSM keeps its previous state.
	ErrBadSnapshot = errors.New("consensus: malformed snapshot")
)
