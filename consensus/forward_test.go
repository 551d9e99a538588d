package consensus

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// stalledForward is a forwarding service that never answers, as a
// leader paused with SIGSTOP or behind a blackholed link: each call
// reports its arrival on calls and waits until its caller gives up.
type stalledForward struct {
	kvrpb.UnimplementedRaftForwardServer
	calls chan struct{}
}

func (s stalledForward) Apply(ctx context.Context, _ *kvrpb.RaftApplyRequest) (*kvrpb.RaftApplyResponse, error) {
	select {
	case s.calls <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestForwardMovesOffAReplacedLeader: a follower's write pending on a
// leader that stopped answering is sent to the new leader as soon as the
// follower knows it, long before the forward's own bound (ApplyTimeout +
// HeartbeatTimeout, 60 s here) would end it.
func TestForwardMovesOffAReplacedLeader(t *testing.T) {
	stalled := stalledForward{calls: make(chan struct{}, 1)}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	kvrpb.RegisterRaftForwardServer(srv, stalled)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	// The dialer may run while newClusterWith is still starting the
	// members, before c is set: it reads the cluster through cp.
	var cp atomic.Pointer[testCluster]
	c := newClusterWith(t, 3, func(cfg *Config) {
		cfg.ApplyTimeout = time.Minute
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			if addr == "stalled" {
				return lis.DialContext(ctx)
			}
			c := cp.Load()
			if c == nil {
				return nil, errors.New("cluster still starting")
			}
			return c.lis[addr].DialContext(ctx)
		}))
	})
	cp.Store(c)
	l := c.leader()
	f := c.follower(l)
	c.nodes[f].SetPeerAPI(c.nodes[l].ID(), "passthrough:///stalled")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.nodes[f].ApplyRetry(ctx, bindCmd("moved", 1, 0, 0, "r-moved"))
		done <- err
	}()
	select {
	case <-stalled.calls:
	case err := <-done:
		t.Fatalf("write finished before reaching the stalled leader: %v", err)
	}
	// The leader drops out of the group; the other two elect a new one.
	c.trans[l].DisconnectAll()
	for i, tr := range c.trans {
		if i != l {
			tr.Disconnect(c.trans[l].LocalAddr())
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("write pending on the replaced leader: %v, want it applied by the new one", err)
	}
	// The write is acknowledged once committed; the follower applies it
	// at its next append.
	waittest.Until(t, 10*time.Second, "the follower holds the binding it wrote", func() bool {
		_, ok := c.nodes[f].FSM().Session("moved")
		return ok
	})
}
