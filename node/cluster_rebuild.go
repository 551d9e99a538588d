package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/store"
)

// RecoveryConfig says what a member does with local state it finds
// corrupt at start.
type RecoveryConfig struct {
	// RebuildOnCorruption (rebuild_on_corruption; on by default in the
	// CLI): a member whose raft log store fails its checksums at start
	// (or whose corrupt newest snapshots leave a gap to its log)
	// sets its raft log, FSM tables and snapshots aside in
	// <data_dir>/corrupt-<time>, has its old entry removed from the
	// configuration, starts empty and rejoins as a nonvoter, and is
	// promoted to voter once it caught up (see consensus.Rejoiner); a
	// REBUILDING marker in the data directory resumes the rejoin after a
	// restart until then. Off,
	// it refuses to start (consensus.ErrNeedsRebuild) and waits for the
	// operator. Either way it never serves the corrupt state. A member
	// with no other member to rebuild from (no join address and no other
	// peer) always refuses: its state may be the only copy.
	RebuildOnCorruption bool
}

// rebuildDirs are the entries of a data directory a rebuild sets aside.
var rebuildDirs = []string{"raft", "fsm", "snapshots"}

// rebuildMarker, in the data directory, says a rebuild has begun and the
// member has not voted again yet. A member that stops in between (a
// crash before the leader sent it anything) finds empty stores at its
// next start; without the marker it would bootstrap a configuration of its
// own from its static peers instead of rejoining.
const rebuildMarker = "REBUILDING"

// localState is a member's stores under its data directory.
type localState struct {
	logs  *store.LogStore
	fsm   *store.FSMStore
	st    *consensus.StoreState
	snaps raft.SnapshotStore
}

// close closes the stores that are open.
func (l *localState) close() {
	if l.st != nil {
		l.st.Close()
	}
	if l.fsm != nil {
		_ = l.fsm.Close()
	}
	if l.logs != nil {
		_ = l.logs.Close()
	}
}

// openLocal opens the member's stores and checks its raft log
// (consensus.CheckLog) and that its snapshots and log join up
// (consensus.CheckSnapshotChain). A corrupt log is reported and, when a rebuild is
// allowed, the member's state is set aside and fresh stores opened;
// rebuilt is then true and the member must rejoin (rebuilder). A corrupt
// FSM store alone is set aside and rebuilt from the log by
// consensus.OpenDurableState.
func (n *Node) openLocal(cc *ClusterConfig) (_ localState, rebuilt bool, err error) {
	l, err := n.openStores(cc)
	if err == nil {
		if _, serr := os.Stat(filepath.Join(cc.DataDir, rebuildMarker)); serr == nil {
			n.log.Warn("a rebuild from peers did not finish; rejoining again", "dir", cc.DataDir)
			return l, true, nil
		}
	}
	if err == nil || !consensus.IsCorrupt(err) {
		return l, false, err
	}
	dir := filepath.Join(cc.DataDir, "raft")
	if !cc.Recovery.RebuildOnCorruption || len(n.rebuildSources()) == 0 {
		n.log.Error("corrupt raft log or snapshots detected; not starting", "dir", dir, "err", err,
			"rebuild_on_corruption", cc.Recovery.RebuildOnCorruption)
		return l, false, fmt.Errorf("%w: raft log store in %s: %w", consensus.ErrNeedsRebuild, dir, err)
	}
	aside, serr := consensus.SetAside(vfs.Default, cc.DataDir, rebuildDirs, time.Now())
	n.log.Error("corrupt raft log or snapshots detected; member state set aside, rebuilding from peers",
		"dir", dir, "set_aside", aside, "err", err, "set_aside_err", serr)
	if serr == nil {
		serr = os.WriteFile(filepath.Join(cc.DataDir, rebuildMarker), []byte(aside+"\n"), 0o644)
	}
	if serr != nil {
		return l, false, fmt.Errorf("%w: %w", err, serr)
	}
	metrics.NewRebuilds(n.metrics.Registerer()).Rebuilt("member")
	l, err = n.openStores(cc)
	return l, err == nil, err
}

// openStores opens the raft log, the FSM tables and the snapshot store,
// and checks the log; on an error it closes what it opened.
func (n *Node) openStores(cc *ClusterConfig) (l localState, err error) {
	defer func() {
		if err != nil {
			l.close()
			l = localState{}
		}
	}()
	obs := n.metrics.Storage
	opts := store.Options{Dir: filepath.Join(cc.DataDir, "raft"), Name: "raft", Logger: n.log, Observer: obs}
	if l.logs, err = store.OpenLogStore(opts); err != nil {
		if consensus.IsCorrupt(err) {
			obs.Corruption("raft", "log") // A WAL that fails replay; GetLog counts its own.
		}
		return l, err
	}
	var fsmRebuilt bool
	if l.fsm, l.st, fsmRebuilt, err = consensus.OpenDurableState(store.Options{Dir: filepath.Join(cc.DataDir, "fsm"), Logger: n.log, Observer: obs}, n.log); err != nil {
		return l, err
	}
	if fsmRebuilt {
		metrics.NewRebuilds(n.metrics.Registerer()).Rebuilt("fsm")
	}
	if l.snaps, err = raft.NewFileSnapshotStore(cc.DataDir, 2, nil); err != nil {
		return l, fmt.Errorf("snapshot store: %w", err)
	}
	snap, err := consensus.NewestSnapshotIndex(l.snaps)
	if err != nil {
		return l, err
	}
	if err = consensus.CheckLog(l.logs, l.logs, snap, l.st.Applied()); err != nil && consensus.IsCorrupt(err) {
		obs.Corruption("raft", "log")
	}
	if err == nil {
		// Corrupt newest snapshots with the log compacted past the newest
		// intact one leave nothing to resume from: rebuild too.
		err = consensus.CheckSnapshotChain(l.snaps, l.logs)
	}
	return l, err
}

// rebuildSources are the cluster API addresses of the members a rebuilt
// member asks: its join address, then its static peers but itself.
func (n *Node) rebuildSources() []string {
	cc := n.cfg.Cluster
	var out []string
	if cc.Join != "" {
		out = append(out, cc.Join)
	}
	peers, _ := cc.peers()
	for _, p := range peers {
		if p.ID != n.cfg.NodeID {
			out = append(out, p.APIAddr)
		}
	}
	return out
}

// rebuilder returns the Rejoiner of this member, with clients of its
// rebuild sources that c closes.
func (c *cluster) rebuilder(n *Node) (consensus.Rejoiner, error) {
	cc := n.cfg.Cluster
	r := consensus.Rejoiner{Token: c.joinToken, DC: n.cfg.DC, Log: n.log,
		Self: consensus.Peer{ID: n.cfg.NodeID, RaftAddr: cc.RaftAddr, APIAddr: cc.APIAddr}}
	for _, addr := range n.rebuildSources() {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(c.creds))
		if err != nil {
			return r, fmt.Errorf("rebuild: %s: %w", addr, err)
		}
		c.rebuildConns = append(c.rebuildConns, conn)
		r.Admins = append(r.Admins, kvrpb.NewClusterAdminClient(conn))
	}
	return r, nil
}

// rejoin runs the rebuilt member's rejoin until it votes again or ctx
// ends, then clears the rebuild marker of dataDir.
func (c *cluster) rejoin(ctx context.Context, r consensus.Rejoiner, dataDir string) {
	if err := r.Rejoin(ctx, c.cn); err != nil {
		c.log.Warn("rebuild: rejoin ended before the member votes again", "err", err)
		return
	}
	if err := os.Remove(filepath.Join(dataDir, rebuildMarker)); err != nil {
		c.log.Warn("rebuild: clearing the marker", "err", err)
	}
	c.log.Info("rebuild: member rebuilt from its peers and voting again")
}
