package producer

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/routing"
)

// newBloomProducer returns a producer of a Bloom summary of capacity.
func newBloomProducer(t *testing.T, capacity int) *Producer {
	t.Helper()
	p, err := New(testPool, Config{Filter: filter.Config{Kind: filter.KindBloom, Capacity: capacity}, QueueLen: 1024},
		rand.New(rand.NewPCG(5, 6)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// blocks returns n distinct block hashes from the offset from.
func blocks(from, n int) []routing.SeqHash {
	hs := make([]routing.SeqHash, n)
	for i := range hs {
		hs[i] = routing.SeqHash(uint64(from+i)*0x9E3779B97F4A7C15 + 1)
	}
	return hs
}

// TestBloomRebuildsAtTheStaleShare: removals publish nothing and count as
// stale until they reach DefaultBloomRebuildShare of the entries the
// filter holds; the batch that reaches it rebuilds the filter from the
// exact set (a new epoch, feeds end with PRODUCER_CHANGED, no stale
// entries, the removed blocks gone, the held ones present).
func TestBloomRebuildsAtTheStaleShare(t *testing.T) {
	p := newBloomProducer(t, 1000)
	held := blocks(0, 300)
	if err := p.Apply(batch(stored(w1, held...))); err != nil {
		t.Fatal(err)
	}
	f, _ := p.Subscribe()
	m := newMirror(t, f)
	// 74 stale of the 300 entries the filter holds: below a quarter.
	if err := p.Apply(batch(removed(w1, held[:74]...))); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Stale != 74 || s.Rebuilds != 0 || s.Deltas != 1 {
		t.Fatalf("stats after removals below the share: %+v", s)
	}
	m.drain(t, f)
	m.assertSame(t, p)
	if err := p.Apply(batch(removed(w1, held[74]))); err != nil {
		t.Fatal(err)
	}
	for range f.Updates() {
	}
	if !errors.Is(f.Err(), ErrProducerChanged) {
		t.Fatalf("feed ended with %v", f.Err())
	}
	s := p.Stats()
	if s.Stale != 0 || s.Rebuilds != 1 || s.Blocks != 225 {
		t.Fatalf("stats after the rebuild: %+v", s)
	}
	g, _ := p.Subscribe()
	m = newMirror(t, g)
	missing, claimed := 0, 0
	for i, h := range held {
		switch in := m.c.Contains(h); {
		case i >= 75 && !in:
			missing++
		case i < 75 && in:
			claimed++
		}
	}
	if missing != 0 || claimed > 1 {
		t.Fatalf("after the rebuild %d held blocks missing, %d removed ones claimed", missing, claimed)
	}
}

// TestBloomGrows: a Bloom summary whose entries pass GrowLoad of its
// capacity is rebuilt at twice the capacity, and keeps every block.
func TestBloomGrows(t *testing.T) {
	p := newBloomProducer(t, 64)
	hs := blocks(0, 600)
	for _, h := range hs {
		if err := p.Apply(batch(stored(w1, h))); err != nil {
			t.Fatal(err)
		}
	}
	s := p.Stats()
	if s.Rebuilds == 0 || s.LoadFactor > DefaultGrowLoad || s.Kind != filter.KindBloom {
		t.Fatalf("stats after growth %+v", s)
	}
	data, _ := p.MarshalBinary()
	b, err := filter.DecodeBloom(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if !b.Contains(h) {
			t.Fatalf("block %#x missing after growth", h)
		}
	}
}
