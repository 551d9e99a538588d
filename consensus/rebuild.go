package consensus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc/metadata"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/store"
)

// A member whose raft log store is corrupt cannot be trusted with
// anything it holds: the log may have lost acknowledged entries, and the
// stable keys beside it (current term, vote) may have lost the vote it
// cast. Such a member is rebuilt from its peers (see the package doc,
// "Rebuilding a corrupt member", for why this is safe):
//
//  1. CheckLog finds the corruption at start, before raft runs;
//  2. SetAside moves the member's stores and snapshots into a directory
//     named after the time, kept for inspection;
//  3. Rejoiner.Forget has the leader remove the member's old entry from
//     the configuration, before its raft runs on empty stores;
//  4. New starts the member empty, without bootstrapping;
//  5. Rejoiner.Rejoin adds it back as a nonvoter, which the leader sends
//     a snapshot and its log, waits until it caught up (CaughtUp), and
//     promotes it to voter.

// corruptDirPrefix names the directory a corrupt member's state is set
// aside in: <prefix><UTC time>.
const corruptDirPrefix = "corrupt-"

// Raft's stable store keys (hashicorp/raft's names).
var stableKeys = [][]byte{[]byte("CurrentTerm"), []byte("LastVoteTerm")}

// CheckLog reads every entry of the raft log store and its stable keys,
// so that Pebble verifies every block's checksum and each entry decodes,
// in index order without holes, and checks that the log (or the newest
// snapshot, snapshotIndex) reaches the FSM tables' applied index. It
// returns the first failure; IsCorrupt tells corruption from an
// unreachable disk. It reads the whole log, which at the default
// TrailingLogs takes milliseconds.
//
// The last check catches what checksums cannot: Pebble reads a WAL that
// stops being readable part-way as the tail of a crash, not as damage,
// and opens a store that silently lost the entries after it. Entries are
// only ever removed from a log's front (compaction behind a snapshot) or
// above the commit index (a new leader's conflicting entries), and the
// tables apply only committed entries, so a log that ends below the
// applied index lost entries this member had acknowledged.
func CheckLog(logs raft.LogStore, stable raft.StableStore, snapshotIndex, applied uint64) error {
	for _, k := range stableKeys {
		// Raft's stores say "not found" for a key never set (a fresh
		// store), and raft reads that as zero; so does this check.
		if _, err := stable.GetUint64(k); err != nil && err.Error() != "not found" {
			return fmt.Errorf("consensus: checking stable key %s: %w", k, err)
		}
	}
	first, err1 := logs.FirstIndex()
	last, err2 := logs.LastIndex()
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("consensus: checking the log's bounds: %w", err)
	}
	if end := max(last, snapshotIndex); end < applied {
		return fmt.Errorf("%w: the raft log ends at %d (snapshot %d), before the applied index %d", store.ErrCorrupt, last, snapshotIndex, applied)
	}
	if last == 0 {
		return nil
	}
	var l raft.Log
	for i := first; i <= last; i++ {
		err := logs.GetLog(i, &l)
		if errors.Is(err, raft.ErrLogNotFound) {
			err = fmt.Errorf("%w: log %d missing between %d and %d", store.ErrCorrupt, i, first, last)
		}
		if err != nil {
			return fmt.Errorf("consensus: checking log %d: %w", i, err)
		}
	}
	return nil
}

// NewestSnapshotIndex is the index of the newest snapshot in snaps, 0
// when it holds none.
func NewestSnapshotIndex(snaps raft.SnapshotStore) (uint64, error) {
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		return 0, err
	}
	return metas[0].Index, nil
}

// SetAside moves the entries names of dir on fsys (those that exist) into
// a new directory dir/corrupt-<UTC time>, and returns its path. The
// entries move by rename within dir, so a data directory that is a mount
// point works, and nothing is copied or deleted.
func SetAside(fsys vfs.FS, dir string, names []string, now time.Time) (string, error) {
	aside := fsys.PathJoin(dir, corruptDirPrefix+now.UTC().Format("20060102T150405.000Z"))
	if err := fsys.MkdirAll(aside, 0o755); err != nil {
		return "", fmt.Errorf("consensus: setting corrupt state aside: %w", err)
	}
	for _, name := range names {
		from := fsys.PathJoin(dir, name)
		if _, err := fsys.Stat(from); err != nil {
			continue
		}
		if err := fsys.Rename(from, fsys.PathJoin(aside, name)); err != nil {
			return aside, fmt.Errorf("consensus: setting %s aside: %w", from, err)
		}
	}
	return aside, nil
}

// Rejoiner brings back a member whose state was set aside, through the
// cluster API of the other members (the same calls as kvrouter cluster
// join and leave, with the same operator credential).
type Rejoiner struct {
	// Admins are clients of other members' cluster APIs; each attempt
	// uses the next (a follower relays to the leader).
	Admins []kvrpb.ClusterAdminClient
	// Token is the join token (cluster_join_token_file); empty sends
	// none (a loopback development cluster).
	Token string
	// Self is this member; DC its DC.
	Self Peer
	DC   string
	// Retry is the pause between attempts (default 1 s).
	Retry time.Duration
	Log   *slog.Logger
}

// Forget has the leader remove Self from the configuration, retrying
// until it succeeded or ctx ends. Call it before New: until it returns,
// the member's old entry may still count as a voter.
func (r Rejoiner) Forget(ctx context.Context) error {
	return r.retry(ctx, "removing the old member entry", func(ctx context.Context, a kvrpb.ClusterAdminClient) error {
		_, err := a.Leave(ctx, &kvrpb.AdminLeaveRequest{Id: r.Self.ID})
		return err
	})
}

// Rejoin adds Self back as a nonvoter, waits until n caught up with the
// leader, and promotes it to voter. Call it once n's cluster API serves
// (the leader asks the member who it is before adding it). It returns
// when the member votes again, or ctx ends.
func (r Rejoiner) Rejoin(ctx context.Context, n *Node) error {
	join := func(nonvoter bool) func(context.Context, kvrpb.ClusterAdminClient) error {
		return func(ctx context.Context, a kvrpb.ClusterAdminClient) error {
			_, err := a.Join(ctx, &kvrpb.AdminJoinRequest{Id: r.Self.ID, RaftAddr: r.Self.RaftAddr,
				ApiAddr: r.Self.APIAddr, Dc: r.DC, Nonvoter: nonvoter})
			return err
		}
	}
	if err := r.retry(ctx, "joining as a nonvoter", join(true)); err != nil {
		return err
	}
	t := time.NewTicker(n.catchUpPoll())
	defer t.Stop()
	for !n.CaughtUp() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("consensus: rejoin: waiting to catch up: %w", ctx.Err())
		case <-t.C:
		}
	}
	return r.retry(ctx, "promoting to voter", join(false))
}

// retry runs call against the admins in turn until it succeeds or ctx
// ends.
func (r Rejoiner) retry(ctx context.Context, what string, call func(context.Context, kvrpb.ClusterAdminClient) error) error {
	if len(r.Admins) == 0 {
		return fmt.Errorf("%w: rejoin: no other member to rebuild from", ErrNeedsRebuild)
	}
	if r.Token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, JoinTokenKey, r.Token)
	}
	log := cmp.Or(r.Log, slog.New(slog.DiscardHandler))
	pause := r.Retry
	if pause <= 0 {
		pause = time.Second
	}
	for i := 0; ; i++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := call(cctx, r.Admins[i%len(r.Admins)])
		cancel()
		if err == nil {
			log.Info("rebuild: "+what, "node", r.Self.ID)
			return nil
		}
		log.Warn("rebuild: "+what+" failed; retrying", "node", r.Self.ID, "attempt", i, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("consensus: rebuild: %s: %w", what, errors.Join(ctx.Err(), err))
		case <-time.After(pause):
		}
	}
}
