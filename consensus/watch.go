package consensus

import (
	"errors"

	"github.com/kvrouter/kvrouter/routing"
)

// Ownership change stream
//
// The FSM records, for every applied entry that changes block ownership,
// one OwnershipBatch in an OwnershipLog: a bounded in-memory ring of the
// most recent batches. Ownership is the rows (worker rank, sequence hash)
// whose tier bits are non-zero; a change of tier bits of a held block is
// not an ownership change. The log is fed from the apply path only, so it
// is the same on every node that applied the same entries, and its
// indexes are raft indexes: a watcher may move from one node to another
// and resume from its last index.
//
// The FSM's hooks (fsm.go, fsm_events.go, fsm_replace.go, restore.go) call
// the log's recording methods under the FSM's write lock; they append to
// reusable scratch slices and never allocate per block. Sealing an entry
// copies its changes into two exact-size slices (about two allocations
// per ownership-changing entry) and takes the log's own mutex for a push:
// apply never waits for a watcher, because readers hold that mutex only to
// copy slice headers. A watcher that falls behind the ring's start gets
// ErrWatchOverrun and starts again from a snapshot (FSM.OwnershipSnapshot).
//
// Session bindings ride on the same stream (watch_sessions.go): an entry
// that binds a key absent before, or drops a binding (unbind, expiry,
// engine invalidation), records the key's kvrpb.SessionKeyHash in its
// batch, and a snapshot lists every bound key's hash. The relay publishes
// them as its DC's session summary.
//
// Why a change stream rather than a raft nonvoter in the relay: a nonvoter
// would make the relay a member of the DC's raft configuration (joins,
// removals, snapshots shipped to it, a full FSM and index in the relay
// process, and a raft peer that the cluster's leader must replicate to on
// its hot path). The stream costs the cluster one ring per node and one
// gRPC stream per relay, keeps the relay out of raft's failure modes, and
// still gives it complete-entry boundaries with raft indexes, the only
// places where a publication may cut.

// OwnershipBatch is the ownership changes of one applied raft entry, in
// apply order. Batches in an OwnershipLog are immutable and shared:
// readers must not modify them.
type OwnershipBatch struct {
	// Index is the entry's raft index.
	Index uint64
	// Prev is the index of the log's previous batch, or the log's start
	// when there was none: no entry in (Prev, Index) changed ownership.
	Prev uint64
	// Changes are in apply order; consecutive changes of one kind and
	// rank within an entry are merged into one.
	Changes []routing.Change
	// SessionsBound and SessionsUnbound are the kvrpb.SessionKeyHash of
	// the session keys the entry bound (absent before, present after) and
	// unbound. They are disjoint.
	SessionsBound, SessionsUnbound []uint64
}

// OwnershipRank is the blocks one rank holds.
type OwnershipRank struct {
	Worker routing.Worker
	Hashes []routing.SeqHash
}

// OwnershipSnapshot is every ownership row at one applied index.
type OwnershipSnapshot struct {
	// Index is the FSM's applied index when the rows were read.
	Index uint64
	// Ranks are sorted by worker; each rank's hashes are in no order.
	Ranks []OwnershipRank
	// Sessions are the kvrpb.SessionKeyHash of every bound session key,
	// sorted.
	Sessions []uint64
}

// Rows returns the number of (rank, block) rows.
func (s OwnershipSnapshot) Rows() int {
	n := 0
	for _, r := range s.Ranks {
		n += len(r.Hashes)
	}
	return n
}

// ErrWatchOverrun is returned for a position the OwnershipLog no longer
// covers: batches after it were evicted, or the FSM restored a snapshot
// past it. The watcher must start again from a snapshot.
var ErrWatchOverrun = errors.New("consensus: ownership watch fell out of the change ring")
