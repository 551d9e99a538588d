package consensus

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/kvrouter/kvrouter/internal/waittest"
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
			waittest.Until(t, 10*time.Second, "the follower applied the leader's commit index", func() bool {
				return f.Raft().AppliedIndex() >= c.nodes[l].Raft().CommitIndex()
			})
			if tc.reachable {
				waittest.Until(t, 10*time.Second, "the follower caught up", f.CaughtUp)
				if f.leaderCommit.Load() == 0 || f.Raft().AppliedIndex() < f.leaderCommit.Load() {
					t.Fatalf("caught up with leader commit %d, applied %d", f.leaderCommit.Load(), f.Raft().AppliedIndex())
				}
				return
			}
			// Its own commit index is reached, yet it must not trust it.
			// The window is 20 of the follower's polls of its leader
			// (catchUpPoll): a follower that took its own commit index
			// would report itself caught up at its first poll, as the
			// reachable case above does once it hears the leader's.
			waittest.Holds(t, 20*f.catchUpPoll(), "the follower not caught up without the leader's commit index", func() bool {
				return !f.CaughtUp()
			})
		})
	}
}
