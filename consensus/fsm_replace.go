package consensus

import (
	"errors"
	"fmt"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

// MaxReplaceEvents bounds the events of one replace-rank chunk. The
// command's encoded size (Config.MaxCommandBytes) bounds it first; this
// bound keeps a malformed entry from making every node allocate for
// millions of empty events.
const MaxReplaceEvents = 1 << 16

var replaceRankSpec = typed[*kvrpb.RaftReplaceRank]{
	name: "replace_rank", apply: (*FSM).replaceRank,
	validate: func(c *kvrpb.RaftReplaceRank) error {
		_, err := decodeReplace(c)
		return err
	},
}.row()

// decodeReplace converts a chunk's events to routing events of its rank.
// Snapshot events carry no meaningful id, so ids are not checked; every
// event must be a well-formed stored event, since a chunk may be applied
// twice by a retried write and stored events are the ones for which that
// changes nothing.
func decodeReplace(c *kvrpb.RaftReplaceRank) ([]routing.Event, error) {
	w := routing.Worker{ID: routing.WorkerID(c.GetEngineId()), Rank: c.GetRank()}
	if len(c.GetEvents()) > MaxReplaceEvents {
		return nil, fmt.Errorf("worker %v: %d events over %d", w, len(c.GetEvents()), MaxReplaceEvents)
	}
	out := make([]routing.Event, len(c.GetEvents()))
	for i, pe := range c.GetEvents() {
		if pe == nil || pe.GetStored() == nil {
			return nil, fmt.Errorf("worker %v: replace event %d is not a stored event", w, i)
		}
		// DecodeEvent insists on a stream id; the id is not used here.
		e, err := wire.DecodeEvent(w, &kvrpb.KVEvent{EventId: 1, Tier: pe.GetTier(), Data: pe.GetData()})
		if err != nil {
			return nil, fmt.Errorf("replace event %d: %w", i, err)
		}
		e.ID = pe.GetEventId()
		out[i] = e
	}
	return out, nil
}

// replaceRank applies one chunk of a rank replacement. The first chunk
// drops the rank (ownership, engine block ids, cursor); every chunk then
// places its stored events with the same rules as KV events, ids aside;
// the last chunk sets the cursor. The index is cleared with the first
// chunk and rebuilt from the rank's tables with the last one, so it
// matches the tables exactly once the replacement completes, and holds a
// subset of them while it is in progress. A chunk that does not decode
// changes nothing (the leader validates before proposing, so this only
// happens across a decoder change).
func (f *FSM) replaceRank(_ uint64, c *kvrpb.RaftReplaceRank) *kvrpb.RaftResult {
	events, err := decodeReplace(c)
	if err != nil {
		return result(CodeInvalid)
	}
	w := routing.Worker{ID: routing.WorkerID(c.EngineId), Rank: c.Rank}
	if c.First {
		f.st.DropRank(w)
		f.watch.rankCleared(w) // Ownership change stream.
		f.idx.RemoveWorker(w)
	}
	for i := range events {
		f.applyBody(&events[i])
	}
	if c.First && !c.Last && len(events) > 0 {
		// The index gets the first chunk now, so a replacement that is
		// never completed still leaves it a subset of the tables.
		f.rebuildRank(w, 0)
	}
	if c.Last {
		f.st.SetCursor(w, c.Cursor)
		f.rebuildRank(w, c.Cursor)
	}
	return counted(len(events))
}

// errReplaceWorker is returned by ReplaceRank for an event of another
// rank.
var errReplaceWorker = errors.New("event names another rank")
