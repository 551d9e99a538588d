package consumer

import (
	"fmt"
	mrand "math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
)

// stacked returns which of the domain's lanes are stacked, in DC order.
func stacked(c *Consumer) []bool {
	es := c.lanes.Load().byDomain[domain]
	if len(es) == 0 {
		return nil
	}
	es[0].lane.mu.RLock()
	defer es[0].lane.mu.RUnlock()
	var out []bool
	for _, e := range es {
		out = append(out, e.lane.stacked)
	}
	return out
}

// waitStacked waits until the domain's lanes are stacked as want says: a
// lane's column is loaded after its snapshot is applied, in parts.
func waitStacked(t *testing.T, c *Consumer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := fmt.Sprint(stacked(c))
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stacked %s, want %s", got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkStack fails unless every stacked lane's column answers the blocks
// hs, and as many random ones, as the lane's filter does, and Best agrees
// with BestOf over Query for hs.
func checkStack(t *testing.T, c *Consumer, hs []routing.SeqHash) {
	t.Helper()
	es := c.lanes.Load().byDomain[domain]
	probes := append(append([]routing.SeqHash{}, hs...), chain(mrand.New(mrand.NewPCG(77, 7)), 2000)...)
	es[0].lane.mu.RLock()
	st := es[0].lane.ds.st
	for _, e := range es {
		l := e.lane
		if !l.stacked {
			continue
		}
		ps := make([]filter.StackProbe, len(probes))
		for n, h := range probes {
			st.LocateInto(&ps[n], h)
		}
		masks := make([]uint32, len(ps))
		for n := range masks {
			masks[n] = 1 << l.col
		}
		st.Hits(ps, masks)
		for n, h := range probes {
			if got, want := masks[n]>>l.col&1 == 1, l.f.Contains(h); got != want {
				es[0].lane.mu.RUnlock()
				t.Fatalf("lane %s, block %d: column %v, filter %v", l.pool.DC, n, got, want)
			}
		}
	}
	es[0].lane.mu.RUnlock()
	now := time.Now()
	got, _, gotOK := c.Best(domain, hs, now, flat, 0)
	want, _, wantOK := BestOf(c.Query(nil, domain, hs, now), flat, 0)
	if gotOK != wantOK || got.Pool != want.Pool || got.Depth != want.Depth {
		t.Fatalf("Best %v %+v, BestOf(Query) %v %+v", gotOK, got, wantOK, want)
	}
}

// TestStackFollowsLanes: over the publication protocol, lanes of one
// geometry are stacked and their columns follow snapshots, deltas and a
// resubscription after a gap; a lane whose pool grows leaves the stack,
// and a removed lane gives up its column.
func TestStackFollowsLanes(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(8, 1))
	s := startServer(t, nil, nil, nil, nil)
	c := newConsumer(t, nil)
	req := chain(rng, 64)
	var lanes []*Lane
	ps := newProducers(t, s, c, &lanes, "dc-b", "dc-c", "dc-d")
	for k, p := range ps {
		_ = p.Apply(storeBatch(1, req[:20*(k+1)]...))
		churn(t, p, rng, 3)
	}
	for k, l := range lanes {
		waitConverged(t, l, ps[k])
	}
	waitStacked(t, c, "[true true true]")
	checkStack(t, c, req)

	// A gap on dc-c's stream: it resubscribes and reloads its column.
	_, seq := ps[1].Epoch()
	s.faults.dropSeq.Store(seq + 2)
	churn(t, ps[1], rng, 4)
	waitConverged(t, lanes[1], ps[1])
	for _, p := range ps {
		churn(t, p, rng, 2)
	}
	for k, l := range lanes {
		waitConverged(t, l, ps[k])
	}
	if l := lanes[1].Status(time.Now()); l.Snapshots < 2 {
		t.Fatalf("dc-c status %+v: want a second snapshot", l)
	}
	waitStacked(t, c, "[true true true]")
	checkStack(t, c, req)

	// dc-d's pool grows into a filter of twice the buckets.
	if err := ps[2].Rebuild(1 << 18); err != nil {
		t.Fatal(err)
	}
	churn(t, ps[2], rng, 2)
	waitConverged(t, lanes[2], ps[2])
	waitStacked(t, c, "[true true false]")
	checkStack(t, c, req)

	c.RemoveLane(poolIn("dc-b"))
	if lanes[0].col != -1 || lanes[0].stacked {
		t.Fatalf("removed lane keeps column %d (stacked %v)", lanes[0].col, lanes[0].stacked)
	}
	// dc-c alone has the stack's geometry now: no stack.
	if got := fmt.Sprint(stacked(c)); got != "[false false]" {
		t.Fatalf("stacked %s after dc-b left", got)
	}
	checkStack(t, c, req)
}

// newProducers registers a producer per DC on s and adds its lane to c.
func newProducers(t *testing.T, s *server, c *Consumer, lanes *[]*Lane, dcs ...string) []*producer.Producer {
	t.Helper()
	var out []*producer.Producer
	for k, dc := range dcs {
		// 2^16 buckets: two chunks of loadColumn.
		p := newProducer(t, poolIn(dc), 1<<17, uint64(20+k), 256)
		s.srv.Register(p)
		l, err := c.AddLane(poolIn(dc), s.client)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
		*lanes = append(*lanes, l)
	}
	return out
}

// TestRestackFollowsTheMajorityGeometry: the stack takes the geometry most
// ready lanes share, and moves to another one when a snapshot makes that
// one shared by more lanes than the stack holds.
func TestRestackFollowsTheMajorityGeometry(t *testing.T) {
	hs := chain(mrand.New(mrand.NewPCG(9, 1)), 64)
	small, large := 512, 4096
	var ls []*Lane
	for i, capacity := range []int{small, large, small, large, small} {
		ls = append(ls, &Lane{pool: poolIn(fmt.Sprintf("dc-%02d", i)), f: filterWith(t, capacity, hs[:10*(i+1)])})
	}
	c := consumerWith(ls...)
	if got := fmt.Sprint(stacked(c)); got != "[true false true false true]" {
		t.Fatalf("stacked %s, want the three small filters", got)
	}
	checkStack(t, c, hs)
	// Two small lanes get large snapshots: the first makes three large
	// filters against two stacked small ones, which moves the stack; the
	// second then fits it.
	for k, i := range []int{0, 2} {
		l := ls[i]
		l.mu.Lock()
		l.f = filterWith(t, large, hs[:10*(i+1)])
		loads, gen := l.snapshotted()
		l.mu.Unlock()
		loadColumns(loads, gen)
		want := []string{"[true true false true false]", "[true true true true false]"}[k]
		if got := fmt.Sprint(stacked(c)); got != want {
			t.Fatalf("after lane %d grew: stacked %s, want %s", i, got, want)
		}
		checkStack(t, c, hs)
	}
}

// TestNoStackForSessionSummaries: lanes of the session summary's domain,
// which only Query reads, get no stack, though they share a geometry;
// block lanes beside them do.
func TestNoStackForSessionSummaries(t *testing.T) {
	hs := chain(mrand.New(mrand.NewPCG(9, 2)), 8)
	var ls []*Lane
	for i := range 3 {
		dc := fmt.Sprintf("dc-%02d", i)
		ls = append(ls,
			&Lane{pool: producer.SessionPool(dc), f: filterWith(t, 512, hs[:i+1])},
			&Lane{pool: poolIn(dc), f: filterWith(t, 512, hs[:i+1])})
	}
	c := consumerWith(ls...)
	for _, l := range ls {
		if want := l.pool.Domain != producer.SessionDomain; l.stacked != want {
			t.Errorf("lane %v: stacked %v, want %v", l.pool, l.stacked, want)
		}
	}
	if got := c.Query(nil, producer.SessionDomain, hs[2:3], time.Unix(0, 0)); len(got) != 3 || got[2].Depth != 1 || got[0].Depth != 0 {
		t.Fatalf("session query %+v, want dc-02 alone to hold the key", got)
	}
}

// TestLanesJoinAndLeaveWithoutRestack: a lane that joins a domain whose
// stack has a free column takes it, and one that leaves frees its own,
// without rebuilding the stack (its generation stays) or moving the other
// lanes' columns; a lane that finds no free column rebuilds it wider, and
// a stack that fewer than two lanes fit is dropped.
func TestLanesJoinAndLeaveWithoutRestack(t *testing.T) {
	hs := chain(mrand.New(mrand.NewPCG(9, 3)), 40)
	lane := func(dc string, depth int) *Lane {
		return &Lane{pool: poolIn(dc), f: filterWith(t, 512, hs[:depth])}
	}
	add := func(c *Consumer, l *Lane) {
		old := c.lanes.Load()
		c.lanes.Store(old.with(&laneEntry{lane: l}))
		c.restackDomain(old.byDomain[domain], domain)
	}
	remove := func(c *Consumer, dc string) {
		old := c.lanes.Load()
		next := &laneSet{byDomain: maps(old.byDomain)}
		next.byDomain[domain] = slices.DeleteFunc(slices.Clone(old.byDomain[domain]), func(e *laneEntry) bool { return e.lane.pool.DC == dc })
		c.lanes.Store(next)
		c.restackDomain(old.byDomain[domain], domain)
	}
	cols := func(c *Consumer) string {
		var out []string
		for _, e := range c.lanes.Load().byDomain[domain] {
			out = append(out, fmt.Sprintf("%s:%d", e.lane.pool.DC, e.lane.col))
		}
		return strings.Join(out, " ")
	}
	a, b, d := lane("dc-a", 10), lane("dc-b", 20), lane("dc-d", 30)
	c := consumerWith(a, b, d)
	ds := a.ds
	gen := ds.gen
	if ds.st == nil || ds.st.Width() != 4 || cols(c) != "dc-a:0 dc-b:1 dc-d:2" {
		t.Fatalf("stack %v, columns %s", ds.st, cols(c))
	}
	// A lane with no filter yet (as AddLane makes them) and then its
	// snapshot.
	cl := &Lane{pool: poolIn("dc-c")}
	add(c, cl)
	if ds.gen != gen || cols(c) != "dc-a:0 dc-b:1 dc-c:3 dc-d:2" {
		t.Fatalf("after dc-c joined: generation %d (was %d), columns %s", ds.gen, gen, cols(c))
	}
	cl.mu.Lock()
	cl.f = filterWith(t, 512, hs[:35])
	loads, g := cl.snapshotted()
	cl.mu.Unlock()
	if len(loads) != 1 || loads[0].l != cl {
		t.Fatalf("dc-c's snapshot fits the stack, but the columns to fill are %v", loads)
	}
	loadColumns(loads, g)
	if got := fmt.Sprint(stacked(c)); got != "[true true true true]" {
		t.Fatalf("stacked %s", got)
	}
	checkStack(t, c, hs)
	// A fifth lane finds no free column: the stack is rebuilt wider, in DC
	// order.
	add(c, lane("dc-e", 5))
	if ds.gen != gen+1 || ds.st.Width() != 8 || cols(c) != "dc-a:0 dc-b:1 dc-c:2 dc-d:3 dc-e:4" {
		t.Fatalf("after dc-e joined: generation %d, width %d, columns %s", ds.gen, ds.st.Width(), cols(c))
	}
	checkStack(t, c, hs)
	gen = ds.gen
	remove(c, "dc-b")
	if ds.gen != gen || cols(c) != "dc-a:0 dc-c:2 dc-d:3 dc-e:4" || b.col != -1 || b.stacked {
		t.Fatalf("after dc-b left: generation %d (was %d), columns %s, dc-b at %d", ds.gen, gen, cols(c), b.col)
	}
	checkStack(t, c, hs)
	// A lane joining takes the freed column.
	add(c, lane("dc-f", 12))
	if ds.gen != gen || cols(c) != "dc-a:0 dc-c:2 dc-d:3 dc-e:4 dc-f:1" {
		t.Fatalf("after dc-f joined: generation %d (was %d), columns %s", ds.gen, gen, cols(c))
	}
	checkStack(t, c, hs)
	for _, dc := range []string{"dc-a", "dc-c", "dc-d", "dc-e"} {
		remove(c, dc)
	}
	if ds.st != nil || fmt.Sprint(stacked(c)) != "[false]" {
		t.Fatalf("one lane left: stack %v, stacked %v", ds.st, stacked(c))
	}
}

// TestDeltasReachAColumnBeingFilled: a rebuild fills its columns a chunk
// per hold of the lock, and a delta that a lane accepts between two of
// its chunks reaches its column, so that the filled column answers as
// the filter does.
func TestDeltasReachAColumnBeingFilled(t *testing.T) {
	hs := chain(mrand.New(mrand.NewPCG(10, 1)), 64)
	// 2^18 buckets: eight chunks.
	const capacity = 1 << 20
	for try := range 50 {
		ls := lanesOf(t, capacity, hs, 10, 20, 30)
		c := consumerWith(ls...)
		l := ls[0]
		grown := filterWith(t, capacity, hs[:40])
		d, err := l.f.Diff(grown)
		if err != nil {
			t.Fatal(err)
		}
		l.mu.Lock()
		ds := l.ds
		loads := restack(ds, slices.Clone(ds.lanes[:3]))
		gen := ds.gen
		l.mu.Unlock()
		filled := make(chan struct{})
		go func() {
			loadColumns(loads, gen)
			close(filled)
		}()
		landed := false
		for !landed {
			l.mu.Lock()
			// Some of the lane's blocks are in its column, not all of
			// its chunks are.
			if l.loading && slices.ContainsFunc(hs[:10], func(h routing.SeqHash) bool { return ds.st.Contains(l.col, h) }) {
				if err := l.f.Apply(d); err != nil {
					t.Fatal(err)
				}
				l.delta(d)
				landed = true
			}
			done := l.stacked
			l.mu.Unlock()
			if done {
				break
			}
			runtime.Gosched()
		}
		<-filled
		if !landed {
			continue
		}
		if got := fmt.Sprint(stacked(c)); got != "[true true true]" {
			t.Fatalf("stacked %s after the fill", got)
		}
		checkStack(t, c, hs)
		t.Logf("the delta landed between chunks in try %d", try+1)
		return
	}
	t.Fatal("in 50 tries no delta landed while a column was being filled")
}

// TestNoRestackWhileARebuildFills: the lanes of a rebuild whose columns
// are still being filled count as the stack's, so that a snapshot of a
// geometry fewer lanes share does not rebuild the stack again meanwhile.
func TestNoRestackWhileARebuildFills(t *testing.T) {
	hs := chain(mrand.New(mrand.NewPCG(10, 2)), 64)
	ls := append(lanesOf(t, 512, hs, 10, 20, 30), lanesOf(t, 4096, hs, 40, 50)...)
	for i, l := range ls {
		l.pool = poolIn(fmt.Sprintf("dc-%02d", i))
	}
	c := consumerWith(ls...)
	l := ls[4]
	l.mu.Lock()
	ds := l.ds
	loads := restack(ds, slices.DeleteFunc(slices.Clone(ds.lanes), func(o *Lane) bool { return o == nil }))
	gen := ds.gen
	// Before the rebuild's columns are filled, a large lane gets a new
	// snapshot: two large filters against three small ones in the stack.
	l.f = filterWith(t, 4096, hs[:55])
	more, moreGen := l.snapshotted()
	l.mu.Unlock()
	if ds.gen != gen || len(more) != 0 {
		t.Fatalf("the snapshot rebuilt the stack (generation %d, was %d) while its columns were filling", ds.gen, gen)
	}
	loadColumns(loads, gen)
	loadColumns(more, moreGen)
	if got := fmt.Sprint(stacked(c)); got != "[true true true false false]" {
		t.Fatalf("stacked %s", got)
	}
	checkStack(t, c, hs)
}

// lanesOf returns lanes dc-00, dc-01, ... with filters of capacity
// holding the first depths[i] blocks of hs.
func lanesOf(t testing.TB, capacity int, hs []routing.SeqHash, depths ...int) []*Lane {
	var ls []*Lane
	for i, d := range depths {
		ls = append(ls, &Lane{pool: poolIn(fmt.Sprintf("dc-%02d", i)), f: filterWith(t, capacity, hs[:d])})
	}
	return ls
}
