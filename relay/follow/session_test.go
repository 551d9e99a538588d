package follow

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/producer"
)

// sessionFold is the bound-session set a feed of batches builds.
type sessionFold map[uint64]bool

// apply folds one batch's session changes; a replacing batch starts over.
func (f sessionFold) apply(b producer.Batch) {
	if b.Replace {
		clear(f)
	}
	for _, c := range b.Sessions {
		for _, h := range c.Hashes {
			f[uint64(h)] = c.Kind == producer.Stored
		}
	}
}

func (f sessionFold) sorted() []uint64 {
	var out []uint64
	for h, bound := range f {
		if bound {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// TestSourceDeliversSessions: binds and unbinds of a real cluster arrive
// as session changes of the live batches, and a source that starts after
// the ring moved on gets them in its snapshot's replacing batch.
func TestSourceDeliversSessions(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.nodes[c.leader()]
	bind := func(key string) {
		t.Helper()
		if _, err := leader.ApplyRetry(context.Background(), &kvrpb.RaftBindSession{Key: key, WorkerId: 1, Dc: "dc1",
			IdleTtlNanos: int64(time.Hour), MaxSessions: 100}); err != nil {
			t.Fatal(err)
		}
	}
	newSource := func() *Source {
		src, err := New(Config{Addrs: c.addrs, DialOptions: []grpc.DialOption{c.dial, grpc.WithTransportCredentials(insecure.NewCredentials())},
			MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}, rand.New(rand.NewPCG(5, 6)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = src.Close() })
		return src
	}
	follow := func(src *Source, fold sessionFold) {
		t.Helper()
		// A write returns once the leader applied it. Under load the node
		// the test writes through may have lost the leadership and
		// forwarded the write, and still be applying it: the source reads
		// up to the last ownership batch that every node applied, and is
		// compared with a node that applied it.
		c.settle()
		ref := c.nodes[c.leader()].FSM()
		want := ref.Ownership().Last()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for src.Index() < want {
			b, err := src.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			fold.apply(b)
		}
		if got, want := fold.sorted(), ref.OwnershipSnapshot().Sessions; !slices.Equal(got, want) {
			t.Fatalf("source sessions %x, FSM %x", got, want)
		}
	}
	live, fold := newSource(), sessionFold{}
	for _, k := range []string{"a", "b", "c"} {
		bind(k)
	}
	c.traffic(5)
	// The unbind goes through a node that is no longer the leader, as
	// writes do after a leadership change under load: it is forwarded,
	// and returns before that node applied it. A failed transfer leaves
	// the unbind a direct write, which the test also covers.
	if _, err := leader.TransferLeadership(context.Background()); err != nil {
		t.Logf("leadership transfer: %v", err)
	}
	if _, err := leader.ApplyRetry(context.Background(), &kvrpb.RaftUnbindSession{Key: "b"}); err != nil {
		t.Fatal(err)
	}
	follow(live, fold)
	if len(fold.sorted()) != 2 || live.Stats().Snapshots != 0 {
		t.Fatalf("live source: %d sessions, stats %+v", len(fold.sorted()), live.Stats())
	}

	for _, n := range c.nodes {
		n.FSM().Ownership().SetLimits(1, 1<<20)
	}
	bind("d")
	c.traffic(3)
	late, lateFold := newSource(), sessionFold{}
	follow(late, lateFold)
	// With a one-entry ring, traffic still being committed when the late
	// source connects can overrun it once more after its first snapshot;
	// what matters is that it started from a snapshot and ends equal to
	// the FSM (follow checks that).
	if late.Stats().Snapshots < 1 || len(lateFold.sorted()) != 3 {
		t.Fatalf("late source: %d sessions, stats %+v", len(lateFold.sorted()), late.Stats())
	}
}
