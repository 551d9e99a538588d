package producer

import (
	"context"
	"fmt"

	"github.com/kvrouter/kvrouter/routing"
)

// Change is one ownership change of one rank, in canonical sequence hashes
// (the DC's FSM has already resolved engine block ids): routing.Change,
// the type the FSM records, so changes reach the producer unconverted.
type Change = routing.Change

// ChangeKind says what one ownership change did (routing.ChangeKind).
type ChangeKind = routing.ChangeKind

// The change kinds, as the producer applies them.
const (
	// Stored: Worker now holds Hashes. Storing a block a rank already holds
	// is a no-op, so a replayed change never takes a second reference.
	Stored = routing.ChangeStored
	// Removed: Worker no longer holds Hashes. Removing a block the rank
	// does not hold is a no-op counted in Stats.UnknownRemovals.
	Removed = routing.ChangeRemoved
	// RankCleared: Worker (one rank) dropped every block.
	RankCleared = routing.ChangeRankCleared
	// WorkerRemoved: every rank of Worker.ID left the pool; Worker.Rank is
	// ignored.
	WorkerRemoved = routing.ChangeWorkerRemoved
)

// Batch is an ordered group of changes that the producer applies whole and
// publishes as at most one delta: a batch boundary is a complete-command
// boundary of the source (for the raft FSM, one log entry).
type Batch struct {
	// Index is the batch's position in the source, strictly increasing
	// (the raft log index for the FSM stream). Zero skips the check.
	Index   uint64
	Changes []Change
	// Replace says that Changes (Stored changes only) are the pool's
	// whole ownership at Index, as after a source resync: the producer
	// applies only the difference between what it holds and them
	// (replace.go), so an unchanged pool publishes nothing.
	Replace bool
	// Sessions are the DC's session binding changes of the same source
	// entry (Stored and Removed of SessionOwner, in SessionHash hashes).
	// Apply ignores them: a DC-wide feed carries them to the session
	// pool's producer through SessionBatch.
	Sessions []Change
}

// SessionBatch returns the batch the session pool's producer applies for
// b: its session changes, at the same index, replacing when b replaces.
func (b Batch) SessionBatch() Batch {
	return Batch{Index: b.Index, Changes: b.Sessions, Replace: b.Replace}
}

// Source delivers ordered change batches. Next blocks until a batch is
// available or ctx ends; any error ends Run. A Source is used by one
// goroutine at a time.
type Source interface {
	Next(ctx context.Context) (Batch, error)
}

// validate checks every change of b before any is applied.
func (b Batch) validate() error {
	for k, c := range b.Changes {
		if !c.Kind.Valid() {
			return fmt.Errorf("%w: change %d has kind %v", ErrInvalidChange, k, c.Kind)
		}
		if b.Replace && c.Kind != Stored {
			return fmt.Errorf("%w: change %d of a replacing batch has kind %v", ErrInvalidChange, k, c.Kind)
		}
	}
	return nil
}

// events counts the block events of b, the unit of the WAN-cost figures.
func (b Batch) events() int {
	n := 0
	for _, c := range b.Changes {
		n += max(len(c.Hashes), 1)
	}
	return n
}
