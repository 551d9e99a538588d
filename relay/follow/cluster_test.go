package follow

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/relay/producer"
)

// runner runs a producer over a Source until stopped.
type runner struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	err    error
}

func run(p *producer.Producer, src *Source) *runner {
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{cancel: cancel}
	r.wg.Go(func() { r.err = p.Run(ctx, src) })
	return r
}

// stop ends the run and checks that it ended because it was stopped.
func (r *runner) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	r.wg.Wait()
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("producer run ended with %v", r.err)
	}
}

// TestSourceFollowsCluster feeds a real producer from a 3-node cluster's
// ownership stream and checks, after each phase, that the producer holds
// exactly the FSM's ownership rows: a first subscription, live traffic
// with a worker removal, a resubscription after the ring moved past the
// source's index (a snapshot), and a leader crash with failover to
// another node.
func TestSourceFollowsCluster(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	addrs := []string{c.addrs[l]} // the leader first, so that its crash forces a failover
	for i, a := range c.addrs {
		if i != l {
			addrs = append(addrs, a)
		}
	}
	c.traffic(20)
	src, err := New(Config{Addrs: addrs, DialOptions: []grpc.DialOption{c.dial, grpc.WithTransportCredentials(insecure.NewCredentials())},
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}, rand.New(rand.NewPCG(5, 6)))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p := newProducer(t)
	r := run(p, src)
	c.traffic(40)
	c.removeWorker(2)
	c.traffic(20)
	c.waitMatch(p)
	if st := src.Stats(); st.Snapshots != 0 || st.Batches == 0 {
		t.Fatalf("phase 1 stats %+v: want batches from the ring and no snapshot", st)
	}

	// Ring overrun: the source is stopped while the ring moves on. Every
	// node applies the traffic before the source resumes: on a node still
	// catching up, more than 4 batches can land between the snapshot and
	// the stream's first read of the ring, which ends the stream with
	// OUT_OF_RANGE and takes a second snapshot. That is the source's
	// documented recovery, but it makes the count below a race.
	r.stop(t)
	for _, n := range c.nodes {
		n.FSM().Ownership().SetLimits(4, 1<<20)
	}
	c.traffic(30)
	c.settle()
	r = run(p, src)
	c.waitMatch(p)
	if st := src.Stats(); st.Snapshots != 1 {
		t.Fatalf("after the overrun stats %+v: want one snapshot", st)
	}

	// Leader crash: the source's node goes away; traffic goes on.
	for _, n := range c.nodes {
		n.FSM().Ownership().SetLimits(consensus.DefaultWatchBatches, consensus.DefaultWatchHashes)
	}
	c.kill(l)
	c.traffic(30)
	c.waitMatch(p)
	r.stop(t)
	st := src.Stats()
	if st.Failures == 0 || st.Connects < 3 {
		t.Fatalf("after the crash stats %+v: want a failure and a reconnect", st)
	}
	if ps := p.Stats(); ps.Inconsistencies != 0 {
		t.Fatalf("producer inconsistencies: %+v", ps)
	}
}
