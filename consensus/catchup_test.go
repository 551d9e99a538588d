package consensus

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// TestCaughtUpNeedsLeaderCommit: a follower reports itself caught up only
// once the leader told it its commit index and it applied that far; its
// own commit index, which raft caps at the follower's last log index, is
// never enough on its own.
func TestCaughtUpNeedsLeaderCommit(t *testing.T) {
	tests := []struct {
		name      string
		reachable bool
	}{
		{name: "leader answers", reachable: true},
		{name: "leader unreachable", reachable: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var adjust func(*Config)
			if !tc.reachable {
				adjust = func(cfg *Config) {
					cfg.DialOptions = []grpc.DialOption{grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) {
						return nil, errors.New("unreachable")
					})}
				}
			}
			c := newClusterWith(t, 3, adjust)
			l := c.leader()
			f := c.nodes[c.follower(l)]
			deadline := time.Now().Add(5 * time.Second)
			for f.Raft().AppliedIndex() < c.nodes[l].Raft().CommitIndex() && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if tc.reachable {
				for !f.CaughtUp() && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				if !f.CaughtUp() || f.leaderCommit.Load() == 0 || f.Raft().AppliedIndex() < f.leaderCommit.Load() {
					t.Fatalf("caught up %v, leader commit %d, applied %d", f.CaughtUp(), f.leaderCommit.Load(), f.Raft().AppliedIndex())
				}
				return
			}
			// Give the follower many polls: its own commit index is reached,
			// yet it must not trust it.
			time.Sleep(20 * f.catchUpPoll())
			if f.CaughtUp() {
				t.Fatalf("caught up without the leader's commit index (applied %d)", f.Raft().AppliedIndex())
			}
		})
	}
}
