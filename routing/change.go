package routing

import "fmt"

// ChangeKind says what one ownership change did. Its values equal the wire
// enum kvrpb.OwnershipChangeKind's.
type ChangeKind uint8

// The ownership change kinds.
const (
	// ChangeStored: Worker now holds Hashes.
	ChangeStored ChangeKind = iota + 1
	// ChangeRemoved: Worker no longer holds Hashes.
	ChangeRemoved
	// ChangeRankCleared: Worker (one rank) dropped every block.
	ChangeRankCleared
	// ChangeWorkerRemoved: every rank of Worker.ID dropped every block;
	// Worker.Rank is 0 and ignored.
	ChangeWorkerRemoved
)

// Valid reports whether k is one of the kinds.
func (k ChangeKind) Valid() bool { return k >= ChangeStored && k <= ChangeWorkerRemoved }

// String names the kind for logs.
func (k ChangeKind) String() string {
	switch k {
	case ChangeStored:
		return "stored"
	case ChangeRemoved:
		return "removed"
	case ChangeRankCleared:
		return "rank_cleared"
	case ChangeWorkerRemoved:
		return "worker_removed"
	}
	return fmt.Sprintf("change(%d)", uint8(k))
}

// Change is one ownership change of one rank, in sequence hashes (engine
// block ids already resolved): what a DC's raft FSM records for every
// applied entry and what the relay's producer summarises.
type Change struct {
	Kind   ChangeKind
	Worker Worker
	// Hashes are the blocks stored or removed (nil for the other kinds).
	Hashes []SeqHash
}
