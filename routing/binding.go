package routing

import "time"

// Binding is a session's (or session group's) engine under session
// affinity. It is shared vocabulary: the node's in-memory bindings and the
// replicated ones of the DC cluster hand out the same value.
type Binding struct {
	// Worker is the bound engine rank.
	Worker Worker
	// Version names this binding: every successful bind gives a new one,
	// unique in its store (the replicated store uses the raft index of the
	// bind, which also makes it a fencing token). Compare-and-set
	// operations name it, so that a request holding an old binding cannot
	// release, move or drop a newer one.
	Version uint64
	// Active is the number of requests holding the binding; while it is
	// positive the binding does not expire.
	Active int
	// IdleDeadline is when the binding expires if no request holds it; it
	// is restarted when the last holder releases it.
	IdleDeadline time.Time
}
