package consensus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// TestCaughtUpNeedsTheLeader: a follower reports itself caught up only
// once the leader told it its applied index and its FSM applied that far;
// its own commit index, which raft caps at the follower's last log index,
// is never enough on its own.
func TestCaughtUpNeedsTheLeader(t *testing.T) {
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
				if f.leaderApplied.Load() == 0 || f.FSM().AppliedIndex() < f.leaderApplied.Load() {
					t.Fatalf("caught up with the leader at %d, applied %d", f.leaderApplied.Load(), f.FSM().AppliedIndex())
				}
				return
			}
			// Its own commit index is reached, yet it must not trust it.
			// The window is 20 of the follower's polls of its leader
			// (catchUpPoll): a follower that took its own commit index
			// would report itself caught up at its first poll, as the
			// reachable case above does once it hears the leader's.
			waittest.Holds(t, 20*f.catchUpPoll(), "the follower not caught up without the leader's applied index", func() bool {
				return !f.CaughtUp()
			})
		})
	}
}

// gatedState is a MemState whose next PutSession, once armed, waits until
// release is closed: the FSM's goroutine is then held inside an apply, as
// a loaded follower's is while raft queues the entries behind it.
type gatedState struct {
	*MemState
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (s *gatedState) PutSession(b *kvrpb.RaftBinding) {
	if s.armed.CompareAndSwap(true, false) {
		close(s.entered)
		<-s.release
	}
	s.MemState.PutSession(b)
}

// TestCaughtUpWaitsForTheFSM: a follower whose raft handed every entry up
// to the leader's to its FSM, which has not applied them, is not caught
// up: reads would miss acknowledged binds. It is once the FSM applied them.
func TestCaughtUpWaitsForTheFSM(t *testing.T) {
	states := make([]*gatedState, 3)
	c := newClusterStates(t, 3, nil, func(i int) State {
		states[i] = &gatedState{MemState: NewMemState(), entered: make(chan struct{}), release: make(chan struct{})}
		return states[i]
	})
	l := c.leader()
	fi := c.follower(l)
	f, gate := c.nodes[fi], states[fi]
	var once sync.Once
	release := func() { once.Do(func() { close(gate.release) }) }
	t.Cleanup(release) // before the cluster's shutdown, which waits for the FSM
	waittest.Until(t, 10*time.Second, "the follower caught up", f.CaughtUp)
	// As at the follower's start: nothing learnt, not caught up.
	f.caughtUp.Store(false)
	f.leaderApplied.Store(0)

	gate.armed.Store(true)
	var keys []string
	for i := range 20 {
		k := fmt.Sprintf("s%d", i)
		if _, err := c.nodes[l].ApplyRetry(context.Background(), &kvrpb.RaftBindSession{Key: k, WorkerId: 1, Dc: "dc1",
			IdleTtlNanos: int64(time.Hour), MaxSessions: 100}); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	<-gate.entered
	last := c.nodes[l].FSM().AppliedIndex()
	waittest.Until(t, 10*time.Second, "the follower's raft handed the leader's entries to its FSM", func() bool {
		return f.Raft().AppliedIndex() >= last
	})
	_, id := f.Raft().LeaderWithID()
	f.learnLeaderApplied(id)
	if got := f.leaderApplied.Load(); got < last {
		t.Fatalf("the leader reported applied index %d, below its last bind's %d", got, last)
	}
	if f.CaughtUp() {
		t.Fatalf("caught up with its FSM held at %d, the leader at %d", f.FSM().AppliedIndex(), f.leaderApplied.Load())
	}
	release()
	waittest.Until(t, 10*time.Second, "the follower caught up once its FSM applied", f.CaughtUp)
	for _, k := range keys {
		if _, ok := f.FSM().Session(k); !ok {
			t.Errorf("caught up without the acknowledged bind %s", k)
		}
	}
}
