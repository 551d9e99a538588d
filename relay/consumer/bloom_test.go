package consumer

import (
	"errors"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/relay/publish"
	"github.com/kvrouter/kvrouter/routing"
)

// TestProtocolBloomSummaries runs the protocol tests that do not depend
// on removals being published as deltas with Bloom summaries (churn
// removes blocks, which rebuilds a Bloom summary, a new epoch each time).
func TestProtocolBloomSummaries(t *testing.T) {
	testKind = filter.KindBloom
	defer func() { testKind = filter.KindCuckoo }()
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{name: "converges", run: TestLaneConvergesAndAnswersQueries},
		{name: "producer restart", run: TestLaneFollowsProducerRestart},
	} {
		t.Run(tc.name, tc.run)
	}
}

// TestBloomLaneEndToEnd follows a Bloom summary over gRPC on loopback:
// adds arrive as deltas; a lost delta costs a resubscription; removals
// below the rebuild share publish nothing, and the lane still claims the
// removed prefix; the removal that passes the share rebuilds the summary,
// the lane resubscribes to its snapshot and the prefix is gone. Best over
// a domain of a cuckoo lane and a Bloom lane answers what BestOf over
// Query does.
func TestBloomLaneEndToEnd(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(9, 1))
	p := newKindProducer(t, "dc-b", filter.KindBloom)
	s := startServer(t, nil, nil, nil, nil)
	s.srv.Register(p)
	c := newConsumer(t, nil)
	l, err := c.AddLane(poolIn("dc-b"), s.client)
	if err != nil {
		t.Fatal(err)
	}
	waitConverged(t, l, p)
	req := chain(rng, 64)
	for i := range 4 {
		_ = p.Apply(storeBatch(1, req[10*i:10*(i+1)]...))
	}
	waitConverged(t, l, p)
	if st := l.Status(time.Now()); st.Snapshots != 1 || st.Deltas != 4 {
		t.Fatalf("status %+v: want one snapshot and four deltas", st)
	}
	wantDepth(t, c, req, 40)

	_, seq := p.Epoch()
	s.faults.dropSeq.Store(seq + 1)
	_ = p.Apply(storeBatch(1, chain(rng, 8)...))
	_ = p.Apply(storeBatch(1, chain(rng, 8)...))
	waitConverged(t, l, p)
	if st := l.Status(time.Now()); st.Snapshots != 2 || !errors.Is(st.LastErr, publish.ErrGap) {
		t.Fatalf("status %+v: want a gap and a second snapshot", st)
	}

	// The filter holds 56 blocks; 13 removed are less than a quarter:
	// no rebuild, and nothing to publish.
	deltas := p.Stats().Deltas
	_ = p.Apply(removeBatch(1, req[27:40]...))
	if st := p.Stats(); st.Deltas != deltas || st.Stale != 13 || st.Rebuilds != 0 {
		t.Fatalf("producer %+v after removals below the share", st)
	}
	wantDepth(t, c, req, 40)
	_ = p.Apply(removeBatch(1, req[26]))
	waitConverged(t, l, p)
	if st := l.Status(time.Now()); st.Snapshots != 3 || !errors.Is(st.LastErr, publish.ErrProducerChanged) {
		t.Fatalf("status %+v: want the rebuild's snapshot", st)
	}
	wantDepth(t, c, req, 26)

	q := newKindProducer(t, "dc-c", filter.KindCuckoo)
	_ = q.Apply(storeBatch(1, req[:30]...))
	s.srv.Register(q)
	m, err := c.AddLane(poolIn("dc-c"), s.client)
	if err != nil {
		t.Fatal(err)
	}
	waitConverged(t, m, q)
	checkBest(t, c, req, "dc-c", 30)
	o := Objective{Slope: 1, Intercept: func(v LaneView) (float64, bool) {
		if v.Pool.DC == "dc-c" {
			return -10, true
		}
		return 0, true
	}}
	got, _, ok := c.Best(domain, req, time.Now(), o, 0)
	if !ok || got.Pool.DC != "dc-b" || got.Depth != 26 {
		t.Fatalf("Best with dc-c 10 further = %v %+v, want dc-b at 26", ok, got)
	}
}

// newKindProducer returns a producer of dc's pool with a summary of kind.
func newKindProducer(t *testing.T, dc string, kind filter.Kind) *producer.Producer {
	t.Helper()
	p, err := producer.New(poolIn(dc), producer.Config{Filter: filter.Config{Capacity: 1 << 12, Seed: 11, Kind: kind}, QueueLen: 256},
		mrand.New(mrand.NewPCG(uint64(len(dc)), 7)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// wantDepth fails t unless the domain's only lane answers depth for hs.
func wantDepth(t *testing.T, c *Consumer, hs []routing.SeqHash, depth int) {
	t.Helper()
	if res := c.Query(nil, domain, hs, time.Now()); len(res) != 1 || !res[0].Ready || res[0].Depth != depth {
		t.Fatalf("query %+v, want depth %d", res, depth)
	}
}
