package consensus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/store"
)

// A corrupt snapshot is detected by checksum in two places: raft's file
// store checks its CRC-64 when it opens one, and Restore checks the
// stream's own XXH3-64 before anything changes. What follows makes the
// node act on it rather than retry it forever:
//
//   - at start, the newest snapshots are verified in turn; each corrupt one
//     is reported (kvrouter_store_corruptions_total{store="snapshot"}) and
//     set aside in its directory as <id>.corrupt.tmp (raft's file store
//     ignores *.tmp), so raft resumes from the newest intact one and
//     replays its log after it. When the log no longer reaches back that
//     far the node refuses to start (ErrNeedsRebuild) instead of serving
//     a partial state;
//   - while running, a snapshot that fails its CRC when raft opens it (to
//     send it to a lagging follower) is reported and set aside the same
//     way, and the node takes a fresh snapshot, which the next attempt
//     sends.

// ErrNeedsRebuild is returned by New when the node's own data cannot bring
// it back to the state it had: its newest intact snapshot is older than
// the start of its raft log. Remove the member, clear its data directory
// and join it again; it then receives a snapshot from the leader.
var ErrNeedsRebuild = errors.New("consensus: local state cannot be recovered; rebuild from peers")

// snapshotsDir is where raft's FileSnapshotStore keeps its snapshots
// under a data directory.
const snapshotsDir = "snapshots"

// checkedSnapshots wraps the node's snapshot store so that a snapshot
// failing its checksum when raft opens it is reported and set aside.
type checkedSnapshots struct {
	raft.SnapshotStore
	n *Node
}

// Open implements raft.SnapshotStore.
func (c *checkedSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := c.SnapshotStore.Open(id)
	if err != nil && isChecksumError(err) {
		c.n.snapshotCorrupt(id, err, true)
	}
	return meta, rc, err
}

// isChecksumError reports whether err is raft's file store refusing a
// snapshot whose CRC does not match (it has no sentinel, only this text).
func isChecksumError(err error) bool {
	return strings.Contains(err.Error(), "CRC mismatch") || errors.Is(err, ErrBadSnapshot)
}

// checkSnapshots verifies the newest snapshots at start, setting aside
// corrupt ones, and checks that the log reaches back to the newest intact
// one when any was set aside.
func (n *Node) checkSnapshots(snaps raft.SnapshotStore, logs raft.LogStore) error {
	return walkSnapshots(snaps, logs, func(id string, err error) error {
		if qerr := n.snapshotCorrupt(id, err, false); qerr != nil {
			return fmt.Errorf("%w: snapshot %s: %w", ErrBadSnapshot, id, errors.Join(err, qerr))
		}
		return nil
	})
}

// CheckSnapshotChain reports, before raft runs, whether the member's
// newest intact snapshot and its raft log still join up: when the newest
// snapshots fail their checksums and the log was compacted past the
// newest intact one, New would refuse to start (ErrNeedsRebuild), and
// the member must be rebuilt from its peers. The error then also
// satisfies IsCorrupt. It sets nothing aside: New does that for a
// corrupt snapshot the log can still cover.
func CheckSnapshotChain(snaps raft.SnapshotStore, logs raft.LogStore) error {
	err := walkSnapshots(snaps, logs, func(string, error) error { return nil })
	if errors.Is(err, ErrNeedsRebuild) {
		return fmt.Errorf("%w (%w)", err, store.ErrCorrupt)
	}
	return err
}

// walkSnapshots verifies the snapshots newest first, calling corrupt for
// each one that fails until one is intact, and, when any failed, checks
// that the log reaches back to the newest intact one.
func walkSnapshots(snaps raft.SnapshotStore, logs raft.LogStore, corrupt func(id string, err error) error) error {
	metas, err := snaps.List()
	if err != nil {
		return fmt.Errorf("consensus: listing snapshots: %w", err)
	}
	setAside := false
	var intact uint64
	for _, m := range metas {
		err := verifySnapshot(snaps, m.ID)
		if err == nil {
			intact = m.Index
			break
		}
		if err := corrupt(m.ID, err); err != nil {
			return err
		}
		setAside = true
	}
	if !setAside {
		return nil
	}
	first, err1 := logs.FirstIndex()
	last, err2 := logs.LastIndex()
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("consensus: reading the log's bounds: %w", err)
	}
	if last > intact && first > intact+1 {
		return fmt.Errorf("%w: newest intact snapshot at %d, log starts at %d", ErrNeedsRebuild, intact, first)
	}
	return nil
}

// verifySnapshot opens a snapshot (raft's file store checks its CRC) and
// checks the stream's own checksum without decoding its records.
func verifySnapshot(snaps raft.SnapshotStore, id string) error {
	_, rc, err := snaps.Open(id)
	if err != nil {
		return err
	}
	defer rc.Close()
	return scanStream(rc, nil)
}

// snapshotCorrupt reports a corrupt snapshot and sets it aside; running
// nodes then take a fresh snapshot so that raft has an intact one to send.
func (n *Node) snapshotCorrupt(id string, cause error, running bool) error {
	n.health.corrupt.Add(1)
	if n.health.metrics != nil {
		n.health.metrics.Corruption("snapshot", "snapshot")
	}
	err := n.setAsideSnapshot(id)
	n.log.Error("corrupt snapshot detected by checksum; set aside", "snapshot", id, "err", cause, "set_aside_err", err)
	if running && err == nil && n.health.resnap.CompareAndSwap(false, true) {
		n.wg.Add(1)
		go n.freshSnapshot()
	}
	return err
}

// setAsideSnapshot renames a file store's snapshot directory so that raft
// no longer lists it; the files stay for inspection.
func (n *Node) setAsideSnapshot(id string) error {
	if n.cfg.DataDir == "" {
		return fmt.Errorf("consensus: snapshot %s is not in a data directory; cannot set it aside", id)
	}
	dir := filepath.Join(n.cfg.DataDir, snapshotsDir, id)
	if err := os.Rename(dir, dir+".corrupt.tmp"); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("consensus: setting snapshot %s aside: %w", id, err)
	}
	return nil
}

// freshSnapshot replaces a snapshot set aside while running: a barrier
// (on a leader) gives raft something new to snapshot, then a user
// snapshot is taken. A failed attempt (a barrier or snapshot that timed
// out on a loaded machine, a disk error, nothing new yet on a quiet
// follower) is retried, 1 s after the first and doubling up to 30 s,
// until one succeeds or the node stops: until then a follower that needs
// a snapshot cannot be sent one.
func (n *Node) freshSnapshot() {
	defer n.wg.Done()
	defer n.health.resnap.Store(false)
	for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
		if n.IsLeader() {
			if err := n.raft.Barrier(n.cfg.BarrierTimeout).Error(); err != nil {
				n.log.Warn("barrier before replacing a corrupt snapshot", "err", err)
			}
		}
		err := n.raft.Snapshot().Error()
		if err == nil {
			n.log.Info("took a fresh snapshot to replace a corrupt one")
			return
		}
		level := slog.LevelWarn
		if errors.Is(err, raft.ErrNothingNewToSnapshot) {
			level = slog.LevelDebug // a quiet follower: retried once entries arrive
		}
		n.log.Log(context.Background(), level, "replacing a corrupt snapshot; retrying", "err", err, "retry_in", wait)
		select {
		case <-n.stop:
			return
		case <-time.After(wait):
		}
	}
}

// Corruptions returns how many corrupt snapshots this node detected.
func (n *Node) Corruptions() uint64 { return n.health.corrupt.Load() }
