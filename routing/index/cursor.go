package index

import (
	"fmt"

	"github.com/kvrouter/kvrouter/routing"
)

// CheckNext is the event-id rule of a rank's stream, the one every keeper
// of a cursor applies (Exact.Apply, the raft FSM, the leader's ingest):
// the id after the cursor applies; an id of 1 after a cursor above 1 is an
// engine restart (restart is true: drop the rank's blocks, then apply); an
// id at or below the cursor is a duplicate (ErrStale); anything higher is
// a gap (ErrGap). After a cursor of exactly 1, an id of 1 is a duplicate.
func CheckNext(ev *routing.Event, cursor uint64) (restart bool, err error) {
	switch {
	case ev.ID == cursor+1:
		return false, nil
	case ev.ID == 1 && cursor > 1:
		return true, nil
	case ev.ID <= cursor:
		return false, fmt.Errorf("%w: worker %v event %d, cursor %d", ErrStale, ev.Worker, ev.ID, cursor)
	}
	return false, fmt.Errorf("%w: worker %v event %d, cursor %d", ErrGap, ev.Worker, ev.ID, cursor)
}
