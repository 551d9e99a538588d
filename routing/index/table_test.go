package index

import (
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// put sets k to v and returns a pointer to the stored value.
func (t *table[V]) put(k uint64, v V) *V {
	p, _ := t.upsert(k)
	*p = v
	return p
}

// TestTableMatchesMap drives the table and a Go map with the same random
// puts and deletes, over keys that include 0 and dense sequential runs
// (engine ids are often small integers), and compares them throughout.
func TestTableMatchesMap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var tb table[uint64]
		ref := map[uint64]uint64{}
		keys := rapid.OneOf(rapid.Uint64Range(0, 300), rapid.Uint64())
		n := rapid.IntRange(0, 2000).Draw(rt, "ops")
		for i := range n {
			k := keys.Draw(rt, "key")
			if rapid.IntRange(0, 2).Draw(rt, "op") == 0 {
				if got, want := tb.del(k), hasKey(ref, k); got != want {
					rt.Fatalf("op %d: del(%d) = %v, want %v", i, k, got, want)
				}
				delete(ref, k)
				continue
			}
			tb.put(k, uint64(i))
			ref[k] = uint64(i)
		}
		if tb.len() != len(ref) {
			rt.Fatalf("len %d, want %d", tb.len(), len(ref))
		}
		for k, v := range ref {
			if got, ok := tb.get(k); !ok || got != v {
				rt.Fatalf("get(%d) = %d,%v, want %d", k, got, ok, v)
			}
		}
		seen := 0
		tb.each(func(k uint64, v *uint64) bool {
			seen++
			if ref[k] != *v {
				rt.Fatalf("each: %d=%d, want %d", k, *v, ref[k])
			}
			return true
		})
		if seen != len(ref) {
			rt.Fatalf("each saw %d keys, want %d", seen, len(ref))
		}
	})
}

func hasKey(m map[uint64]uint64, k uint64) bool { _, ok := m[k]; return ok }

// TestTableLoad checks that growth keeps the load within the documented
// band, which is what the memory target rests on.
func TestTableLoad(t *testing.T) {
	var tb table[uint64]
	r := rand.New(rand.NewPCG(7, 7))
	for i := range 200000 {
		tb.put(r.Uint64()|1, 0)
		if i > 1000 {
			load := float64(tb.n) / float64(tb.cap)
			if load < 0.70 || load > 0.8 {
				t.Fatalf("load %.3f at %d keys", load, tb.n)
			}
		}
	}
}

func TestMixInverse(t *testing.T) {
	if a, b := uint64(mixMul), uint64(mixInv); a*b != 1 {
		t.Fatalf("mixInv is not the inverse of mixMul: %#x", a*b)
	}
	rapid.Check(t, func(rt *rapid.T) {
		k := rapid.Uint64().Draw(rt, "k")
		if unmix(mix(k)) != k {
			rt.Fatalf("unmix(mix(%#x)) = %#x", k, unmix(mix(k)))
		}
	})
}
