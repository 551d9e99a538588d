package filter

import (
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/kvrouter/kvrouter/routing"
)

// allCanonical fails unless every bucket of a compact filter is canonical
// and the buckets hold Len entries.
func allCanonical(t fataler, c *Cuckoo) {
	t.Helper()
	n := 0
	for i := range uint64(c.Buckets()) {
		im := c.image(i)
		if !canonicalImage(im) {
			t.Fatalf("bucket %d image %#x is not canonical", i, im)
		}
		n += occupiedImage(c.kind, im)
	}
	if n != c.Len() {
		t.Fatalf("buckets hold %d entries, Len %d", n, c.Len())
	}
}

func TestCompactBasics(t *testing.T) {
	tests := []struct {
		name      string
		inserts   []routing.SeqHash
		deletes   []routing.SeqHash
		want      []routing.SeqHash
		wantLen   int
		deleteErr error
	}{
		{name: "empty", wantLen: 0},
		{name: "one", inserts: []routing.SeqHash{7}, want: []routing.SeqHash{7}, wantLen: 1},
		{name: "insert then delete", inserts: []routing.SeqHash{7, 8}, deletes: []routing.SeqHash{7}, want: []routing.SeqHash{8}, wantLen: 1},
		{name: "duplicate is a multiset", inserts: []routing.SeqHash{7, 7}, deletes: []routing.SeqHash{7}, want: []routing.SeqHash{7}, wantLen: 1},
		{name: "delete absent", inserts: []routing.SeqHash{7}, deletes: []routing.SeqHash{9}, want: []routing.SeqHash{7}, wantLen: 1, deleteErr: ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCuckooOf(t, KindCuckooCompact, 64, 1)
			for _, h := range tt.inserts {
				if err := c.Insert(h); err != nil {
					t.Fatal(err)
				}
			}
			for _, h := range tt.deletes {
				if err := c.Delete(h); !errors.Is(err, tt.deleteErr) {
					t.Fatalf("Delete(%d) = %v, want %v", h, err, tt.deleteErr)
				}
			}
			if got := c.ContainsPrefix(tt.want); got != len(tt.want) {
				t.Errorf("ContainsPrefix = %d, want %d", got, len(tt.want))
			}
			if c.Len() != tt.wantLen || c.Kind() != KindCuckooCompact {
				t.Errorf("Len = %d kind %v, want %d", c.Len(), c.Kind(), tt.wantLen)
			}
			allCanonical(t, c)
		})
	}
}

// TestCompactProperty runs rapid-chosen insert/delete sequences on a tiny
// compact table, where kicks and failures are frequent, against an exact
// multiset: no false negatives, canonical buckets after every step, and a
// failed insert leaves the filter byte-identical.
func TestCompactProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := mustCuckooOf(t, KindCuckooCompact, 4, rapid.Uint64().Draw(t, "seed"))
		c.maxKicks = rapid.IntRange(1, 50).Draw(t, "kicks")
		var live []routing.SeqHash
		failures := 0
		// An op's low two bits pick delete (0) or insert, the rest a
		// live entry or one of 64 keys: rapid's unbiased Uint64 keeps the
		// table near full, so kicks and failed inserts are common.
		for _, op := range rapid.SliceOfN(rapid.Uint64(), 40, 300).Draw(t, "ops") {
			if op%4 == 0 && len(live) > 0 {
				k := int(op >> 2 % uint64(len(live)))
				if err := c.Delete(live[k]); err != nil {
					t.Fatalf("delete of present: %v", err)
				}
				live = slices.Delete(live, k, k+1)
			} else {
				h := routing.SeqHash(mix64(op >> 2 % 64))
				before, n := storage(c), c.Len()
				if err := c.Insert(h); err != nil {
					if !errors.Is(err, ErrFull) || !slices.Equal(before, storage(c)) || c.Len() != n {
						t.Fatalf("failed insert changed the filter or wrong error: %v", err)
					}
					failures++
				} else {
					live = append(live, h)
				}
			}
			allCanonical(t, c)
		}
		for _, h := range live {
			if !c.Contains(h) {
				t.Fatalf("false negative for %#x after %d failed inserts", h, failures)
			}
		}
		if c.Len() != len(live) {
			t.Fatalf("Len = %d, want %d", c.Len(), len(live))
		}
	})
}

// TestRefSetPropertyBothKinds drives a RefSet of either cuckoo kind with
// capacity for far fewer blocks than the key space, so that inserts fail:
// every held block the RefSet reports resident tests present, every failed
// Add wraps ErrFull and leaves the summary byte-identical.
func TestRefSetPropertyBothKinds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		kind := rapid.SampledFrom(cuckooKinds).Draw(t, "kind")
		cfg := Config{Kind: kind, Capacity: 8, MaxKicks: 20, Seed: rapid.Uint64().Draw(t, "seed")}
		r, err := NewRefSet(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		ref := map[routing.SeqHash]int{}
		// An op's low two bits pick Remove (0) or Add, the rest one of 48
		// keys, so removes of unheld blocks and failed inserts both occur.
		for _, op := range rapid.SliceOfN(rapid.Uint64(), 40, 300).Draw(t, "ops") {
			h := routing.SeqHash(mix64(op >> 2 % 48))
			c := r.Summary().(*Cuckoo)
			before := storage(c)
			if op%4 != 0 {
				if err := r.Add(h); err != nil && (!errors.Is(err, ErrFull) || !slices.Equal(before, storage(c))) {
					t.Fatalf("Add = %v, or the failed insert changed the filter", err)
				}
				ref[h]++
				continue
			}
			if err := r.Remove(h); (ref[h] == 0) != errors.Is(err, ErrNotHeld) {
				t.Fatalf("Remove(%#x) with %d refs = %v", h, ref[h], err)
			}
			if ref[h] > 0 {
				ref[h]--
			}
		}
		checkRefSet(t, r, ref)
	})
}

// checkRefSet compares a RefSet with its reference counts: no false
// negatives for resident blocks, summary entries = held minus omitted.
func checkRefSet(t *rapid.T, r *RefSet, ref map[routing.SeqHash]int) {
	held := 0
	for h, n := range ref {
		if n == 0 {
			continue
		}
		held++
		if r.Refs(h) != n || (r.refs[h].resident && !r.Summary().Contains(h)) {
			t.Fatalf("block %#x: refs %d want %d, resident %v contains %v", h, r.Refs(h), n, r.refs[h].resident, r.Summary().Contains(h))
		}
	}
	if r.Len() != held || r.Summary().Len() != held-r.Omitted() {
		t.Fatalf("len %d summary %d omitted %d, want %d held", r.Len(), r.Summary().Len(), r.Omitted(), held)
	}
}

// TestCompactRollback fills a compact table until inserts fail and checks
// that each failed insert left the bytes, the count and the change log as
// they were.
func TestCompactRollback(t *testing.T) {
	c := mustCuckooOf(t, KindCuckooCompact, 16, 7)
	c.maxKicks = 20
	c.TrackChanges()
	var kept []routing.SeqHash
	failures := 0
	for _, h := range randomHashes(newRand(7), 200) {
		before, n := storage(c), c.Len()
		c.TakeChanges()
		err := c.Insert(h)
		if err == nil {
			kept = append(kept, h)
			continue
		}
		failures++
		if !errors.Is(err, ErrFull) || !slices.Equal(before, storage(c)) || c.Len() != n {
			t.Fatalf("failed insert changed the filter, or error %v is not ErrFull", err)
		}
		if d := c.TakeChanges(); len(d.Images) != 0 {
			t.Fatalf("failed insert left %d changed buckets", len(d.Images))
		}
	}
	if failures == 0 {
		t.Fatal("table never filled: the rollback path was not exercised")
	}
	if got := c.ContainsPrefix(kept); got != len(kept) {
		t.Fatalf("false negative for kept block %d after rollbacks", got)
	}
}
