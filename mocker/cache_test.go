package mocker

import (
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// chain returns n sequence hashes of a prompt family, for cache unit tests.
func chain(family, n int) []routing.SeqHash {
	locals := make([]routing.LocalHash, n)
	for i := range locals {
		locals[i] = routing.LocalHash(family*1000 + i + 1)
	}
	return routing.SeqHashes(nil, locals)
}

// fill caches seqs as one request would: allocate, compute, commit.
func fill(t *testing.T, c *cache, seqs []routing.SeqHash) []*block {
	t.Helper()
	if !c.allocate(len(seqs)) {
		t.Fatalf("cannot allocate %d blocks", len(seqs))
	}
	var refs []*block
	for i, s := range seqs {
		var parent routing.SeqHash
		if i > 0 {
			parent = seqs[i-1]
		}
		b, _ := c.commit(s, parent, routing.LocalHash(i), i)
		refs = append(refs, b)
	}
	return refs
}

func removedOf(evs []routing.Event) []routing.EngineHash {
	var out []routing.EngineHash
	for _, ev := range evs {
		out = append(out, ev.Removed...)
	}
	return out
}

func TestCacheLRUEvictsDeepestOldestFirst(t *testing.T) {
	log := newEventLog(testWorker, 16)
	c := newCache(6, log)
	a, b := chain(1, 2), chain(2, 2)
	c.release(fill(t, c, a), 0)
	c.release(fill(t, c, b), 0)
	// Touch a again: it becomes the most recently used.
	c.release(c.acquire(nil, a), 0)
	log.drain()
	// Two free blocks are used before anything is evicted.
	if !c.allocate(2) || len(log.drain()) != 0 {
		t.Fatal("evicted while free blocks remained")
	}
	want := []routing.SeqHash{b[1], b[0], a[1], a[0]}
	for _, s := range want {
		if !c.allocate(1) {
			t.Fatal("allocation failed with evictable blocks")
		}
		got := removedOf(log.drain())
		if len(got) != 1 || got[0] != EngineHash(s) {
			t.Fatalf("evicted %x, want %x", got, EngineHash(s))
		}
	}
	if c.allocate(1) {
		t.Fatal("allocated beyond capacity")
	}
}

func TestCacheNeverEvictsReferenced(t *testing.T) {
	log := newEventLog(testWorker, 16)
	c := newCache(4, log)
	held := fill(t, c, chain(1, 3))
	c.release(fill(t, c, chain(2, 1)), 0)
	log.drain()
	if c.allocate(2) {
		t.Fatal("allocation of 2 succeeded with one evictable block")
	}
	if len(log.drain()) != 0 || len(c.byHash) != 4 {
		t.Fatal("failed allocation changed the cache")
	}
	if !c.allocate(1) {
		t.Fatal("could not evict the unreferenced block")
	}
	for _, b := range held {
		if c.byHash[b.seq] != b || b.refs != 1 {
			t.Fatalf("referenced block %x lost", b.seq)
		}
	}
	if c.used() != 4 || c.available() != 0 {
		t.Fatalf("used %d available %d", c.used(), c.available())
	}
}

func TestCachePrefix(t *testing.T) {
	c := newCache(10, newEventLog(testWorker, 4))
	a := chain(1, 4)
	refs := fill(t, c, a[:3])
	c.release(refs[2:], 0) // third block unreferenced, first two held
	other := append(append([]routing.SeqHash{}, a[:2]...), chain(9, 2)...)
	tests := []struct {
		name           string
		seqs           []routing.SeqHash
		limit          int
		wantHits, idle int
	}{
		{name: "full prefix", seqs: a, limit: 10, wantHits: 3, idle: 1},
		{name: "limited", seqs: a, limit: 2, wantHits: 2, idle: 0},
		{name: "diverging", seqs: other, limit: 10, wantHits: 2, idle: 0},
		{name: "miss", seqs: chain(5, 3), limit: 10, wantHits: 0, idle: 0},
		{name: "empty", seqs: nil, limit: 10, wantHits: 0, idle: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hits, idle := c.prefix(tc.seqs, tc.limit)
			if hits != tc.wantHits || idle != tc.idle {
				t.Fatalf("prefix = %d, %d; want %d, %d", hits, idle, tc.wantHits, tc.idle)
			}
		})
	}
}

func TestCacheCommitDuplicateAdopts(t *testing.T) {
	c := newCache(4, newEventLog(testWorker, 4))
	a := chain(1, 1)
	first := fill(t, c, a)
	if !c.allocate(1) {
		t.Fatal("allocate")
	}
	b, stored := c.commit(a[0], 0, 1, 0)
	if stored || b != first[0] || b.refs != 2 {
		t.Fatalf("duplicate commit: stored %v refs %d", stored, b.refs)
	}
	if c.free != 3 {
		t.Fatalf("private copy not freed: free %d", c.free)
	}
}
