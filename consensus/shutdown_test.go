package consensus

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/internal/waittest"
)

// TestShutdownResolvesInFlightProposals shuts the leader down while
// clients keep proposing through every node (a follower forwards over
// gRPC): every proposal must return, with a result or an error, instead
// of waiting forever on an Apply future raft abandoned at shutdown
// (without Node.flushApplies about one run in eight hung in some round
// of three; six rounds make a regression show more often). With the
// flush alone, proposals that arrived after its barrier could still be
// abandoned: with two other processes busy on this machine's two cores,
// one run in eight hung, and none in 20 since Shutdown stops new
// proposals first and waiters are released when raft is down.
func TestShutdownResolvesInFlightProposals(t *testing.T) {
	for round := range 6 {
		c := newCluster(t, 3)
		l := c.leader()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var calls [6]atomic.Int64
		for g := range 6 {
			n := c.nodes[(l+g)%3]
			wg.Go(func() {
				for k := 0; ctx.Err() == nil; k++ {
					calls[g].Add(1)
					key := fmt.Sprintf("r%d-g%d-k%d", round, g, k)
					_, _ = n.Apply(ctx, bindCmd(key, 1, 0, t0, key))
				}
			})
		}
		// Runs before the cluster's own cleanup: on a failure the clients
		// stop before their nodes do, instead of spinning on errors
		// through the tests that follow.
		t.Cleanup(func() { cancel(); wg.Wait() })
		// The leader goes down while proposals flow through every node:
		// once each client's first proposal returned, its next one is in
		// flight.
		waittest.Until(t, 10*time.Second, fmt.Sprintf("round %d: every client's first proposal returned", round), func() bool {
			for g := range calls {
				if calls[g].Load() < 2 {
					return false
				}
			}
			return true
		})
		c.kill(l)
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: proposals still waiting 10s after the leader shut down", round)
		}
		c.close()
	}
}
