package filter

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// newRand returns the fixed-seed generator every test draws from.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// randomHashes returns n distinct block hashes.
func randomHashes(rng *rand.Rand, n int) []routing.SeqHash {
	seen := make(map[routing.SeqHash]bool, n)
	out := make([]routing.SeqHash, 0, n)
	for len(out) < n {
		h := routing.SeqHash(rng.Uint64())
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

// fataler is the part of testing.TB and *rapid.T the builders need.
type fataler interface {
	Helper()
	Fatal(...any)
	Fatalf(string, ...any)
}

// mustCuckoo builds a 16-bit cuckoo filter with exactly buckets buckets.
func mustCuckoo(t fataler, buckets int, seed uint64) *Cuckoo {
	t.Helper()
	return mustCuckooOf(t, KindCuckoo, buckets, seed)
}

// mustCuckooOf builds a cuckoo filter of kind with exactly buckets buckets.
func mustCuckooOf(t fataler, kind Kind, buckets int, seed uint64) *Cuckoo {
	t.Helper()
	c, err := NewCuckoo(Config{Kind: kind, Capacity: int(float64(buckets*slotsPerBucket) * MaxTargetLoad), TargetLoad: MaxTargetLoad, Seed: seed}, newRand(seed))
	if err != nil {
		t.Fatal(err)
	}
	if c.Buckets() != buckets || c.Kind() != kind {
		t.Fatalf("built %d buckets, want %d", c.Buckets(), buckets)
	}
	return c
}

// fillTo inserts fresh keys until the filter reaches load (fraction of
// slots) and returns them; any insert failure fails the test.
func fillTo(t testing.TB, c *Cuckoo, rng *rand.Rand, load float64) []routing.SeqHash {
	t.Helper()
	n := int(load * float64(c.Buckets()*slotsPerBucket))
	keys := randomHashes(rng, n)
	for i, h := range keys {
		if err := c.Insert(h); err != nil {
			t.Fatalf("insert %d of %d (load %.3f): %v", i, n, c.LoadFactor(), err)
		}
	}
	return keys
}

// measureFP returns the share of probes fresh random keys that test
// positive; keys in skip are not probed.
func measureFP(s Summary, rng *rand.Rand, probes int, skip map[routing.SeqHash]bool) float64 {
	hits, n := 0, 0
	for n < probes {
		h := routing.SeqHash(rng.Uint64())
		if skip[h] {
			continue
		}
		n++
		if s.Contains(h) {
			hits++
		}
	}
	return float64(hits) / float64(n)
}

// setOf returns keys as a set.
func setOf(keys []routing.SeqHash) map[routing.SeqHash]bool {
	m := make(map[routing.SeqHash]bool, len(keys))
	for _, h := range keys {
		m[h] = true
	}
	return m
}

// storage returns a copy of c's bucket storage as bytes, so tests can check
// that an operation left a filter of either kind byte-identical.
func storage(c *Cuckoo) []byte {
	if c.packed != nil {
		return slices.Clone(c.packed)
	}
	out := make([]byte, 8*len(c.words))
	for i, w := range c.words {
		binary.LittleEndian.PutUint64(out[8*i:], w)
	}
	return out
}

// cuckooKinds lists the cuckoo layouts that tests run over.
var cuckooKinds = []Kind{KindCuckoo, KindCuckooCompact}
