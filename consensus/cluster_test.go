package consensus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

func newSessions(t *testing.T, n *Node) *Sessions {
	t.Helper()
	s, err := NewSessions(n, SessionsConfig{TTL: time.Minute, MaxSessions: 1000, KeepAliveInterval: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConcurrentBindersFirstWriterWins binds one key from every node at
// once: exactly one bind wins and every loser learns the winner.
func TestConcurrentBindersFirstWriterWins(t *testing.T) {
	c := newCluster(t, 3)
	c.leader()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	type out struct {
		b   Binding
		won bool
		err error
	}
	var mu sync.Mutex
	var outs []out
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		s := newSessions(t, n)
		for g := range 4 {
			wg.Go(func() {
				b, won, err := s.Bind(ctx, "session-1", routing.Worker{ID: routing.WorkerID(10*i + g + 1)}, 0, c.clock.Now())
				mu.Lock()
				outs = append(outs, out{b, won, err})
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	winners := 0
	var win Binding
	for _, o := range outs {
		if o.err != nil {
			t.Fatal(o.err)
		}
		if o.won {
			winners++
			win = o.b
		}
	}
	if winners != 1 {
		t.Fatalf("%d winners, want 1", winners)
	}
	for _, o := range outs {
		if o.b.Worker != win.Worker || o.b.Version != win.Version {
			t.Fatalf("a loser saw %+v, winner %+v", o.b, win)
		}
	}
	hs := c.converge()
	if hs[0] != hs[1] || hs[1] != hs[2] {
		t.Fatalf("state hashes differ: %x", hs)
	}
	for _, n := range c.nodes {
		if b, ok := n.FSM().Session("session-1"); !ok || b.Version != win.Version {
			t.Fatalf("node %s has %v", n.ID(), b)
		}
	}
}

// TestLeaderLossKeepsAcknowledgedBinds kills the leader after binds were
// acknowledged; a new leader serves binds after its barrier and every
// acknowledged bind is still there.
func TestLeaderLossKeepsAcknowledgedBinds(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s := newSessions(t, c.nodes[c.follower(l)])
	acked := map[string]uint64{}
	for i := range 20 {
		key := fmt.Sprintf("k%d", i)
		b, won, err := s.Bind(ctx, key, routing.Worker{ID: 1}, 0, c.clock.Now())
		if err != nil || !won {
			t.Fatalf("bind %s: won %v err %v", key, won, err)
		}
		acked[key] = b.Version
	}
	c.kill(l)
	nl := c.leader()
	if nl == l {
		t.Fatal("dead leader still reported ready")
	}
	if _, won, err := s.Bind(ctx, "after", routing.Worker{ID: 2}, 0, c.clock.Now()); err != nil || !won {
		t.Fatalf("bind after failover: won %v err %v", won, err)
	}
	c.converge()
	for _, n := range c.nodes {
		if n == c.nodes[l] {
			continue
		}
		for k, v := range acked {
			if b, ok := n.FSM().Session(k); !ok || b.Version != v {
				t.Fatalf("node %s lost acknowledged bind %s@%d: %v", n.ID(), k, v, b)
			}
		}
	}
}

// TestPartitionedLeaderCannotCommit cuts the leader off: its writes are
// indeterminate, the majority elects a new leader and goes on, and after
// healing every node converges to one state.
func TestPartitionedLeaderCannotCommit(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	ctx := context.Background()
	c.trans[l].DisconnectAll()
	for i, tr := range c.trans {
		if i != l {
			tr.Disconnect(c.trans[l].LocalAddr())
		}
	}
	_, err := c.nodes[l].Apply(ctx, bindCmd("minority", 1, 0, 0, "m1"))
	if err == nil || !Retryable(err) {
		t.Fatalf("minority write: %v, want a retryable (indeterminate) error", err)
	}
	nl := -1
	waittest.Until(t, 10*time.Second, "the majority has a ready leader", func() bool {
		for i, n := range c.nodes {
			if i != l && n.Ready() {
				nl = i
			}
		}
		return nl >= 0
	})
	r, err := c.nodes[nl].Apply(ctx, bindCmd("majority", 2, 0, 0, "M1"))
	if err != nil || !r.Won {
		t.Fatalf("majority bind: %v %v", r, err)
	}
	for i, tr := range c.trans {
		for j, peer := range c.trans {
			if i != j {
				tr.Connect(peer.LocalAddr(), peer)
			}
		}
	}
	c.leader()
	if _, err := c.nodes[nl].Apply(ctx, &kvrpb.RaftUnbindSession{Key: "nothing"}); err != nil && !Retryable(err) {
		t.Fatal(err)
	}
	hs := c.converge()
	if hs[0] != hs[1] || hs[1] != hs[2] {
		t.Fatalf("hashes differ after healing: %x", hs)
	}
	if _, ok := c.nodes[l].FSM().Session("majority"); !ok {
		t.Fatal("healed node misses the majority's bind")
	}
}

// TestKVEventsReplicatedToEveryIndex proposes KV events from a follower's
// batcher and checks every node's index answers alike.
func TestKVEventsReplicatedToEveryIndex(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	b := NewBatcher(c.nodes[c.follower(l)], BatcherConfig{})
	var hs []routing.SeqHash
	for wid := range 8 {
		w := routing.Worker{ID: routing.WorkerID(wid + 1)}
		for id := uint64(1); id <= 10; id += 2 {
			if err := b.Add(kvEvents(w, id, 2, uint64(wid))); err != nil {
				t.Fatal(err)
			}
		}
	}
	hs = append(hs, 0, routing.Chain(0, 1))
	n, err := b.Flush(context.Background())
	if err != nil || n != 40 {
		t.Fatalf("flushed %d batches, err %v", n, err)
	}
	c.converge()
	want := c.nodes[0].FSM().Index().FindMatches(hs, nil)
	if len(want) != 1 || want[0].Device != 2 {
		t.Fatalf("matches %v", want)
	}
	for _, node := range c.nodes[1:] {
		got := node.FSM().Index().FindMatches(hs, nil)
		if fmt.Sprint(got) != fmt.Sprint(want) || node.FSM().Index().Stats().Pairs != c.nodes[0].FSM().Index().Stats().Pairs {
			t.Fatalf("node %s: %v, want %v", node.ID(), got, want)
		}
	}
}

// TestLeaderExpiresIdleBindings advances the stamped clock past the TTL:
// the leader's expiry loop drops the binding on every node.
func TestLeaderExpiresIdleBindings(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	s := newSessions(t, c.nodes[l])
	ctx := context.Background()
	b, _, err := s.Bind(ctx, "idle", routing.Worker{ID: 1}, 0, c.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "idle", b.Version, c.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c.clock.Advance(2 * time.Minute)
	waittest.Until(t, 10*time.Second, "the leader's expiry loop dropped the idle binding", func() bool {
		return c.nodes[l].FSM().NumSessions() == 0
	})
	c.converge()
	for _, n := range c.nodes {
		if n.FSM().NumSessions() != 0 {
			t.Fatalf("node %s kept an expired binding", n.ID())
		}
	}
}

// TestHeldBindingSurvivesThroughKeepAlive holds a binding on a follower
// across several TTLs of stamped time. The leader's expiry loop judges by
// FSM.Expired at the stamped time: the test asks it the same question
// once every node applied the keep-alives, instead of waiting for the
// loop to run (TestLeaderExpiresIdleBindings shows that it does).
func TestHeldBindingSurvivesThroughKeepAlive(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	s := newSessions(t, c.nodes[c.follower(l)])
	ctx := context.Background()
	b, _, err := s.Bind(ctx, "held", routing.Worker{ID: 1}, 0, c.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		c.clock.Advance(30 * time.Second)
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c.converge()
	if refs := c.nodes[l].FSM().Expired(c.clock.Now().UnixNano(), MaxRefsPerEntry); len(refs) > 0 {
		t.Fatalf("the leader would expire %v although the binding is held", refs)
	}
	got, ok, err := s.Lookup(ctx, "held", c.clock.Now())
	if err != nil || !ok || got.Version != b.Version || got.Active != 1 {
		t.Fatalf("held binding: %+v %v %v", got, ok, err)
	}
}

// TestForwardedCallIsNotForwardedAgain calls a follower's forwarding
// service as if forwarded: it refuses instead of hopping again.
func TestForwardedCallIsNotForwardedAgain(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	f := c.follower(l)
	data, _ := Encode(bindCmd("k", 1, 0, 0, ""))
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(forwardedKey, "n9"))
	_, err := (&forwardServer{n: c.nodes[f]}).Apply(ctx, &kvrpb.RaftApplyRequest{Command: data})
	if !errors.Is(fromStatus(err), ErrForwardLoop) {
		t.Fatalf("got %v", err)
	}
	// Garbage forwarded to the leader is refused there. On a loaded
	// machine an election can leave the follower without a leader for a
	// moment, which it reports as ErrNoLeader (nothing was proposed):
	// that is retried.
	bad := []byte{0x55, 1}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.nodes[f].applyBytes(context.Background(), bad, false)
		if errors.Is(err, ErrNoLeader) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !errors.Is(err, ErrBadCommand) {
			t.Fatalf("garbage through forwarding: %v", err)
		}
		break
	}
}
