package producer

import (
	"errors"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/routing"
)

var (
	w1  = routing.Worker{ID: 1, Rank: 0}
	w1b = routing.Worker{ID: 1, Rank: 1}
	w2  = routing.Worker{ID: 2, Rank: 0}
	w3  = routing.Worker{ID: 3, Rank: 0}
)

func TestReferenceCounts(t *testing.T) {
	tests := []struct {
		name    string
		batches []Batch
		refs    map[routing.SeqHash]int
		unknown uint64
	}{
		{name: "three ranks one entry", batches: []Batch{batch(stored(w1, 10), stored(w2, 10), stored(w3, 10))},
			refs: map[routing.SeqHash]int{10: 3}},
		{name: "repeated store is one reference", batches: []Batch{batch(stored(w1, 10), stored(w1, 10))},
			refs: map[routing.SeqHash]int{10: 1}},
		{name: "unknown removal is a no-op", batches: []Batch{batch(stored(w1, 10), removed(w2, 10))},
			refs: map[routing.SeqHash]int{10: 1}, unknown: 1},
		{name: "last holder leaves", batches: []Batch{batch(stored(w1, 10), stored(w2, 10)), batch(removed(w1, 10), removed(w2, 10))},
			refs: map[routing.SeqHash]int{10: 0}},
		{name: "rank cleared", batches: []Batch{batch(stored(w1, 10, 11), stored(w1b, 10)), batch(Change{Kind: RankCleared, Worker: w1})},
			refs: map[routing.SeqHash]int{10: 1, 11: 0}},
		{name: "worker removed drops every rank once", batches: []Batch{batch(stored(w1, 10, 11), stored(w1b, 10), stored(w2, 10)), batch(Change{Kind: WorkerRemoved, Worker: routing.Worker{ID: 1}})},
			refs: map[routing.SeqHash]int{10: 1, 11: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestProducer(t, 1024, 16)
			for _, b := range tt.batches {
				if err := p.Apply(b); err != nil {
					t.Fatal(err)
				}
			}
			blocks := 0
			for h, want := range tt.refs {
				if got := p.Refs(h); got != want {
					t.Errorf("refs(%d) = %d, want %d", h, got, want)
				}
				if want > 0 {
					blocks++
				}
			}
			s := p.Stats()
			if s.Blocks != blocks || s.UnknownRemovals != tt.unknown || s.Inconsistencies != 0 {
				t.Errorf("stats %+v, want %d blocks, %d unknown removals", s, blocks, tt.unknown)
			}
		})
	}
}

func TestApplyRefuses(t *testing.T) {
	tests := []struct {
		name string
		b    Batch
		want error
	}{
		{name: "unknown kind", b: Batch{Index: 5, Changes: []Change{{Kind: 99, Worker: w1}}}, want: ErrInvalidChange},
		{name: "stale index", b: Batch{Index: 1, Changes: []Change{stored(w1, 7)}}, want: ErrStaleBatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestProducer(t, 1024, 16)
			if err := p.Apply(Batch{Index: 1, Changes: []Change{stored(w2, 1)}}); err != nil {
				t.Fatal(err)
			}
			if err := p.Apply(tt.b); !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
			if p.Refs(7) != 0 {
				t.Fatal("refused batch was applied")
			}
		})
	}
}

func TestSequenceNumbersAreContiguous(t *testing.T) {
	p := newTestProducer(t, 1024, 64)
	f, err := p.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	m := newMirror(t, f)
	for i := range 20 {
		if err := p.Apply(batch(stored(w1, routing.SeqHash(i*7919)))); err != nil {
			t.Fatal(err)
		}
	}
	// A batch that changes nothing publishes nothing.
	if err := p.Apply(batch(stored(w1, 0))); err != nil {
		t.Fatal(err)
	}
	p.Beat(time.Unix(0, 0))
	m.drain(t, f)
	if m.seq != 20 {
		t.Fatalf("mirror at seq %d, want 20", m.seq)
	}
	m.assertSame(t, p)
}

func TestSlowSubscriberIsCutWithLagged(t *testing.T) {
	p := newTestProducer(t, 1024, 2)
	slow, _ := p.Subscribe()
	fast, _ := p.Subscribe()
	m := newMirror(t, fast)
	for i := range 5 {
		if err := p.Apply(batch(stored(w1, routing.SeqHash(1000+i)))); err != nil {
			t.Fatal(err)
		}
		m.drain(t, fast)
	}
	for range slow.Updates() {
	}
	if err := slow.Err(); !errors.Is(err, ErrLagged) {
		t.Fatalf("slow feed ended with %v, want ErrLagged", err)
	}
	m.assertSame(t, p)
	if s := p.Stats(); s.Lagged != 1 || s.Subscribers != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestRebuildChangesEpochAndEndsFeeds(t *testing.T) {
	p := newTestProducer(t, 1024, 16)
	_ = p.Apply(batch(stored(w1, 1, 2, 3)))
	f, _ := p.Subscribe()
	if err := p.Rebuild(4096); err != nil {
		t.Fatal(err)
	}
	for range f.Updates() {
	}
	if !errors.Is(f.Err(), ErrProducerChanged) {
		t.Fatalf("feed ended with %v", f.Err())
	}
	epoch, seq := p.Epoch()
	if epoch == f.Epoch || seq != 0 {
		t.Fatalf("epoch %#x seq %d after rebuild (was %#x)", epoch, seq, f.Epoch)
	}
	g, _ := p.Subscribe()
	m := newMirror(t, g)
	_ = p.Apply(batch(removed(w1, 2)))
	m.drain(t, g)
	m.assertSame(t, p)
}

func TestGrowthKeepsEveryBlock(t *testing.T) {
	p := newTestProducer(t, 64, 16)
	start, _ := p.Epoch()
	var hs []routing.SeqHash
	for i := range 600 {
		h := routing.SeqHash(uint64(i)*0x9E3779B97F4A7C15 + 1)
		hs = append(hs, h)
		if err := p.Apply(batch(stored(w1, h))); err != nil {
			t.Fatal(err)
		}
	}
	s := p.Stats()
	if s.Rebuilds == 0 || s.Epoch == start || s.Omitted != 0 {
		t.Fatalf("stats after growth %+v", s)
	}
	data, _ := p.MarshalBinary()
	c, err := filter.DecodeCuckoo(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if !c.Contains(h) {
			t.Fatalf("block %#x missing after growth", h)
		}
	}
}

func TestTooLargeDeltaResyncs(t *testing.T) {
	p, err := New(testPool, Config{Filter: filter.Config{Capacity: 1 << 14}, MaxDeltaBytes: 1024}, newRandForTest())
	if err != nil {
		t.Fatal(err)
	}
	f, _ := p.Subscribe()
	hs := make([]routing.SeqHash, 200)
	for i := range hs {
		hs[i] = routing.SeqHash(uint64(i+1) * 0x9E3779B97F4A7C15)
	}
	if err := p.Apply(batch(stored(w1, hs...))); err != nil {
		t.Fatal(err)
	}
	for range f.Updates() {
	}
	if !errors.Is(f.Err(), ErrResync) {
		t.Fatalf("feed ended with %v", f.Err())
	}
	g, _ := p.Subscribe()
	m := newMirror(t, g)
	m.assertSame(t, p)
}

func TestClose(t *testing.T) {
	p := newTestProducer(t, 64, 4)
	f, _ := p.Subscribe()
	p.Close()
	for range f.Updates() {
	}
	if !errors.Is(f.Err(), ErrClosed) {
		t.Fatalf("feed ended with %v", f.Err())
	}
	if _, err := p.Subscribe(); !errors.Is(err, ErrClosed) {
		t.Fatalf("subscribe after close: %v", err)
	}
	if err := p.Apply(batch(stored(w1, 1))); !errors.Is(err, ErrClosed) {
		t.Fatalf("apply after close: %v", err)
	}
}

func TestValidation(t *testing.T) {
	tests := []struct {
		name string
		pool PoolID
		cfg  Config
		want error
	}{
		{name: "no dc", pool: PoolID{Domain: testPool.Domain}, cfg: Config{Filter: filter.Config{Capacity: 10}}, want: ErrInvalidPool},
		{name: "no block size", pool: PoolID{DC: "a", Domain: Domain{Model: "m", HashScheme: "x"}}, cfg: Config{Filter: filter.Config{Capacity: 10}}, want: ErrInvalidPool},
		{name: "bloom rebuild share", pool: testPool, cfg: Config{Filter: filter.Config{Capacity: 10, Kind: filter.KindBloom}, BloomRebuildShare: 1}, want: ErrConfig},
		{name: "no capacity", pool: testPool, cfg: Config{}, want: ErrConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.pool, tt.cfg, newRandForTest()); !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
		})
	}
}
