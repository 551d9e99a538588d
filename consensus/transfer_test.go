package consensus

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestTransferLeadership(t *testing.T) {
	tests := []struct {
		name    string
		nodes   int
		from    func(c *testCluster) int
		wantErr error
		moved   bool
	}{
		{name: "leader of three hands over", nodes: 3, from: (*testCluster).leader, moved: true},
		{name: "follower has nothing to do", nodes: 3, from: func(c *testCluster) int { return c.follower(c.leader()) }},
		{name: "single member has no target", nodes: 1, from: (*testCluster).leader, wantErr: ErrNoTransferTarget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, tt.nodes)
			old := c.leader()
			n := c.nodes[tt.from(c)]
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			to, err := n.TransferLeadership(ctx)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if !tt.moved {
				return
			}
			if c.nodes[old].IsLeader() {
				t.Fatal("the old leader still leads")
			}
			// The old leader gave up leading (checked above); the new one is
			// not looked up again: on a loaded machine it may lose a later
			// election, which is raft working, not the transfer failing. The
			// reported id may be empty before this node hears of the winner.
			if to == c.nodes[old].ID() {
				t.Fatalf("transfer reported %q as the new leader, from %s", to, c.nodes[old].ID())
			}
		})
	}
}
