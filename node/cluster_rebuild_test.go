package node_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/node"
)

// TestRebuildCorruptRaftLog: a member whose raft log on disk is damaged
// sets its state aside at restart, rejoins empty through its peers,
// serves only once caught up, votes again, and ends with the others'
// state.
func TestRebuildCorruptRaftLog(t *testing.T) {
	c := startDCCluster(t, 1, func(cfg *node.Config) { cfg.Cluster.Recovery.RebuildOnCorruption = true })
	l := c.leader()
	for i := range 20 {
		c.complete(l, fmt.Sprintf("s%d", i), []int{1, 2, 3, i})
	}
	f := (l + 1) % 3
	waitUntil(t, 10*time.Second, "the follower to apply the sessions", c.statesEqual)
	c.stop(f)
	dir := c.cfgs[f].Cluster.DataDir
	wals, _ := filepath.Glob(filepath.Join(dir, "raft", "*.log"))
	if len(wals) == 0 {
		t.Fatal("no raft WAL to corrupt")
	}
	for _, p := range wals {
		flipFile(t, p)
	}
	c.start(f) // Returns once the member reports itself ready (caught up).
	n := c.nodes[f]
	if got := testutil.ToFloat64(metrics.NewRebuilds(n.Metrics().Registerer()).Total.WithLabelValues("member")); got != 1 {
		t.Fatalf("member rebuilds counted: %v, want 1", got)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, "corrupt-*", "raft"))
	if len(aside) != 1 {
		t.Fatalf("the damaged raft log was not kept aside: %v", aside)
	}
	waitUntil(t, 20*time.Second, "the rebuilt member to vote again", func() bool {
		members, err := n.Cluster().Members()
		if err != nil {
			return false
		}
		for _, m := range members {
			if string(m.ID) == c.cfgs[f].NodeID {
				return m.Suffrage == raft.Voter
			}
		}
		return false
	})
	waitUntil(t, 5*time.Second, "the rebuild marker to be cleared", func() bool {
		_, err := os.Stat(filepath.Join(dir, "REBUILDING"))
		return os.IsNotExist(err)
	})
	waitUntil(t, 10*time.Second, "equal state on every member", c.statesEqual)
	if got := n.Cluster().FSM().NumSessions(); got < 20 {
		t.Fatalf("the rebuilt member holds %d sessions, want the 20 acknowledged", got)
	}
}

// flipFile flips bytes spread over a file on disk.
func flipFile(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 8 && len(b) > 0; i++ {
		b[len(b)*i/8] ^= 0x5a
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitUntil polls cond until it holds or d passes.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	waittest.Until(t, d, what, cond)
}
