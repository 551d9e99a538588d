package consensus

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/store"
)

// openDurable adopts a durable state's applied index and rebuilds the
// exact index from its tables. Called by NewFSM before any apply.
func (f *FSM) openDurable(d durableState) {
	f.durable = d
	f.applied, f.term = d.Applied(), d.AppliedTerm()
	d.Ranks(func(w routing.Worker, cursor uint64) bool {
		f.rebuildRank(w, cursor)
		return true
	})
}

// rebuildRank replaces a rank's index entries with its tables' blocks.
func (f *FSM) rebuildRank(w routing.Worker, cursor uint64) {
	var events []routing.Event
	var arena []routing.StoredBlock
	f.st.Blocks(w, func(eh routing.EngineHash, seq routing.SeqHash) bool {
		events, arena = appendRootEvents(events, arena, w, eh, seq, f.st.Tiers(w, seq))
		return true
	})
	if err := f.idx.ReplaceWorker(w, events, cursor); err != nil {
		f.log.Warn("rebuilding a rank's index from its tables", "worker", w.String(), "err", err)
	}
}

// replayed reports whether a durable state already holds entry l, which
// raft replays after a restart. Callers hold mu.
func (f *FSM) replayed(l *raft.Log) bool {
	return f.durable != nil && l.Index <= f.durable.Applied()
}

// commitDurable commits a durable state's writes with the last applied
// entry. A failure is logged once: the state stops mirroring and keeps
// its last good index, from which a restart replays. Callers hold mu.
func (f *FSM) commitDurable(term uint64) {
	if f.durable == nil {
		return
	}
	err := f.durable.Commit(f.applied, term)
	if errors.Is(err, store.ErrDiskFull) {
		return // Retried with the next commit; reported by the store's Observer.
	}
	if err != nil && !f.durableFailed {
		f.durableFailed = true
		f.log.Error("durable state stopped; it keeps its last committed index", "index", f.applied, "err", err)
	}
}

// checkRestoreIndex refuses a snapshot a durable state cannot commit: its
// applied index must only grow. Callers hold mu.
func (f *FSM) checkRestoreIndex(index uint64) error {
	if f.durable != nil && index <= f.durable.Applied() {
		return fmt.Errorf("%w: snapshot index %d is not after the durable state's %d",
			ErrBadSnapshot, index, f.durable.Applied())
	}
	return nil
}

// restoreNewer restores the latest snapshot when it is newer than a
// durable state, before raft starts. Raft then starts with
// NoSnapshotRestoreOnStart: it resumes after the latest snapshot's index,
// and the durable state covers at least that much, so the entries it
// replays are either skipped (already applied) or new. Raft's snapshot
// index counts entries the FSM never sees (barriers, no-ops), so a
// snapshot whose stream is not newer than the durable state is ignored.
func (f *FSM) restoreNewer(snaps raft.SnapshotStore) error {
	metas, err := snaps.List()
	if err != nil {
		return fmt.Errorf("consensus: listing snapshots: %w", err)
	}
	if len(metas) == 0 || metas[0].Index <= f.durable.Applied() {
		return nil
	}
	meta, rc, err := snaps.Open(metas[0].ID)
	if err != nil {
		return fmt.Errorf("consensus: opening snapshot %s: %w", metas[0].ID, err)
	}
	if err := f.restore(rc, true, meta); err != nil {
		return fmt.Errorf("consensus: restoring snapshot %s: %w", metas[0].ID, err)
	}
	return nil
}
