package consensus

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// ErrNotLeader is returned by RestoreBackup on a member that does not
// lead: only the leader can replace the cluster's state.
var ErrNotLeader = errors.New("consensus: not the leader")

// restoreIndexGap is how far past the log's last index a restored state
// is placed. Raft puts a restored snapshot at max(its index, the last
// index)+1, the FSM needs that index before raft calls it (a durable
// state only moves forward, and a refused restore makes raft panic), and
// the leader keeps appending while the restore waits its turn; the gap
// leaves room for that many entries, far more than a restore's few
// milliseconds can see. Raft leaves a hole in the log there anyway.
const restoreIndexGap = 1 << 16

// RestoreTimeout bounds a restore from its enqueueing to its commit on a
// majority.
const RestoreTimeout = 2 * time.Minute

// WriteBackup writes a snapshot of this member's state, taken now, to w
// in the raft snapshot format (self-checking: a header with the applied
// index and term, the records, and an XXH3 checksum), and returns what
// it holds. It does not touch raft's own snapshots or log.
func (n *Node) WriteBackup(w io.Writer) (*kvrpb.BackupInfo, error) {
	snap, err := n.fsm.Snapshot()
	if err != nil {
		return nil, err
	}
	s := snap.(*fsmSnapshot)
	info := &kvrpb.BackupInfo{Dc: n.cfg.DC, NodeId: n.cfg.NodeID, AppliedIndex: s.applied, AppliedTerm: s.term,
		CreatedUnixMs: n.cfg.Now().UnixMilli(), Bindings: countBindings(s.recs)}
	if err := s.write(w); err != nil {
		return nil, fmt.Errorf("consensus: writing backup: %w", err)
	}
	return info, nil
}

// withoutRequests drops the remembered results of writes (the records
// that make a retried write idempotent). They answer retries of the
// source cluster's own writes, which cannot reach the restored cluster;
// but a request id is unique only within one cluster's history (a node
// id, a start time, a counter), so a result remembered from another
// cluster could answer a different write here, which would then be
// acknowledged without being applied.
func withoutRequests(recs []*kvrpb.RaftSnapshotRecord) []*kvrpb.RaftSnapshotRecord {
	return slices.DeleteFunc(recs, func(r *kvrpb.RaftSnapshotRecord) bool { return r.GetRequest() != nil })
}

// countBindings counts the session bindings among recs.
func countBindings(recs []*kvrpb.RaftSnapshotRecord) uint64 {
	var k uint64
	for _, r := range recs {
		if r.GetBinding() != nil {
			k++
		}
	}
	return k
}

// RestoreBackup replaces the whole cluster's state with the snapshot
// stream r (as WriteBackup wrote it, from this cluster or another): the
// stream is read and verified whole first, so a damaged backup changes
// nothing (ErrBadSnapshot). The state is then re-stamped with an index
// past this cluster's log and handed to raft, which installs it on the
// leader, then on every follower, and commits an entry after it. Only the
// leader restores (ErrNotLeader). Bindings, workers, ownership and
// cursors all come from the backup; the membership stays this cluster's.
// Writes in flight at that moment fail (raft aborts them) and are retried
// by their callers like any indeterminate write.
func (n *Node) RestoreBackup(r io.Reader) (*kvrpb.BackupRestoreResponse, error) {
	_, recs, err := readSnapshot(r)
	if err != nil {
		return nil, err
	}
	recs = withoutRequests(recs)
	if !n.IsLeader() {
		return nil, ErrNotLeader
	}
	term := statUint(n.raft.Stats(), "term")
	at := n.raft.LastIndex() + restoreIndexGap
	var buf bytes.Buffer
	if err := (&fsmSnapshot{applied: at + 1, term: term, recs: recs}).write(&buf); err != nil {
		return nil, err
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: at, Term: term, Size: int64(buf.Len())}
	if err := n.raft.Restore(meta, &buf, RestoreTimeout); err != nil {
		return nil, fmt.Errorf("consensus: restore: %w", err)
	}
	n.log.Info("state restored from a backup", "index", at+1, "bindings", countBindings(recs))
	return &kvrpb.BackupRestoreResponse{Index: at + 1, LeaderId: n.cfg.NodeID, Bindings: countBindings(recs)}, nil
}
