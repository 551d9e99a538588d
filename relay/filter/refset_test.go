package filter

import (
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/kvrouter/kvrouter/routing"
)

func mustRefSet(t *testing.T, cfg Config) *RefSet {
	t.Helper()
	r, err := NewRefSet(cfg, newRand(cfg.Seed))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRefSetCounts walks one block through three holders: one filter entry
// throughout, deleted when the last holder leaves.
func TestRefSetCounts(t *testing.T) {
	r := mustRefSet(t, Config{Capacity: 100})
	const h = routing.SeqHash(42)
	steps := []struct {
		name      string
		add       bool
		wantErr   error
		wantRefs  int
		wantEntry bool
	}{
		{name: "first holder", add: true, wantRefs: 1, wantEntry: true},
		{name: "second holder", add: true, wantRefs: 2, wantEntry: true},
		{name: "third holder", add: true, wantRefs: 3, wantEntry: true},
		{name: "one leaves", wantRefs: 2, wantEntry: true},
		{name: "two leave", wantRefs: 1, wantEntry: true},
		{name: "last leaves", wantRefs: 0, wantEntry: false},
		{name: "never added", wantErr: ErrNotHeld, wantRefs: 0, wantEntry: false},
	}
	for _, st := range steps {
		var err error
		if st.add {
			err = r.Add(h)
		} else {
			err = r.Remove(h)
		}
		if !errors.Is(err, st.wantErr) {
			t.Fatalf("%s: err %v, want %v", st.name, err, st.wantErr)
		}
		if r.Refs(h) != st.wantRefs || r.Summary().Contains(h) != st.wantEntry {
			t.Fatalf("%s: refs %d contains %v", st.name, r.Refs(h), r.Summary().Contains(h))
		}
		if want := min(st.wantRefs, 1); r.Summary().Len() != want {
			t.Fatalf("%s: summary holds %d entries, want %d", st.name, r.Summary().Len(), want)
		}
	}
}

// TestRefSetRemoveUnknownNeverDeletes finds a block that shares a held
// block's fingerprint and bucket, so that a raw filter delete of it would
// remove the held block's entry, and checks that the RefSet refuses it.
func TestRefSetRemoveUnknownNeverDeletes(t *testing.T) {
	r := mustRefSet(t, Config{Capacity: 100})
	const held = routing.SeqHash(0xfeed)
	if err := r.Add(held); err != nil {
		t.Fatal(err)
	}
	c := r.Summary().(*Cuckoo)
	fp, i := c.addr.locate(held)
	twin := routing.SeqHash(1)
	for ; ; twin++ {
		if f, j := c.addr.locate(twin); f == fp && j == i && twin != held {
			break
		}
	}
	before := slices.Clone(c.words)
	if err := r.Remove(twin); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Remove(twin) = %v, want ErrNotHeld", err)
	}
	if !slices.Equal(before, c.words) || !c.Contains(held) {
		t.Fatal("removing an unheld twin changed the filter")
	}
	if err := c.Delete(twin); err != nil || c.Contains(held) {
		t.Fatal("the twin was not a real collision: the test proves nothing")
	}
}

// TestRefSetFullAndGrow overfills a tiny cuckoo summary: failed inserts are
// reported and counted as omitted, the exact set keeps them, and Grow
// rebuilds a larger filter that holds every block.
func TestRefSetFullAndGrow(t *testing.T) {
	r := mustRefSet(t, Config{Capacity: 8, MaxKicks: 10})
	keys := randomHashes(newRand(9), 64)
	failed := 0
	for _, h := range keys {
		if err := r.Add(h); err != nil {
			if !errors.Is(err, ErrFull) {
				t.Fatalf("Add = %v, want ErrFull", err)
			}
			failed++
		}
	}
	if failed == 0 || r.Omitted() != failed || r.Len() != len(keys) {
		t.Fatalf("failed %d omitted %d len %d", failed, r.Omitted(), r.Len())
	}
	gen := r.Generation()
	for r.Omitted() > 0 || r.Summary().Len() != r.Len() {
		if err := r.Grow(); err != nil && !errors.Is(err, ErrFull) {
			t.Fatal(err)
		}
	}
	if r.Generation() == gen || r.Capacity() < len(keys) {
		t.Fatalf("generation %d capacity %d after growth", r.Generation(), r.Capacity())
	}
	for _, h := range keys {
		if !r.Summary().Contains(h) {
			t.Fatalf("false negative for %#x after Grow", h)
		}
	}
}

// TestRefSetOmittedRemove checks that removing an omitted block never
// touches the filter and that re-adding it retries the insert.
func TestRefSetOmittedRemove(t *testing.T) {
	r := mustRefSet(t, Config{Capacity: 8, MaxKicks: 5})
	var omitted routing.SeqHash
	for _, h := range randomHashes(newRand(10), 64) {
		if err := r.Add(h); err != nil {
			omitted = h
			break
		}
	}
	if r.Omitted() != 1 {
		t.Fatal("no insert failed")
	}
	c := r.Summary().(*Cuckoo)
	before := slices.Clone(c.words)
	if err := r.Remove(omitted); err != nil || !slices.Equal(before, c.words) || r.Omitted() != 0 {
		t.Fatalf("Remove(omitted) = %v, filter changed %v, omitted %d", err, !slices.Equal(before, c.words), r.Omitted())
	}
}

// TestRefSetProperty drives a RefSet with rapid-chosen add/remove
// sequences over a small key space against a reference multiset: no false
// negatives, summary entries equal distinct held blocks.
func TestRefSetProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r, err := NewRefSet(Config{Capacity: 64, Seed: rapid.Uint64().Draw(t, "seed")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ref := map[routing.SeqHash]int{}
		ops := rapid.SliceOfN(rapid.IntRange(-30, 30), 1, 300).Draw(t, "ops")
		for _, op := range ops {
			h := routing.SeqHash(uint64(abs(op)) * 0x9E3779B97F4A7C15)
			if op >= 0 {
				if err := r.Add(h); err != nil {
					t.Fatal(err)
				}
				ref[h]++
				continue
			}
			err := r.Remove(h)
			if ref[h] == 0 {
				if !errors.Is(err, ErrNotHeld) {
					t.Fatalf("Remove(unheld) = %v", err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if ref[h]--; ref[h] == 0 {
				delete(ref, h)
			}
		}
		for h, n := range ref {
			if r.Refs(h) != n || !r.Summary().Contains(h) {
				t.Fatalf("block %#x: refs %d want %d, contains %v", h, r.Refs(h), n, r.Summary().Contains(h))
			}
		}
		if r.Len() != len(ref) || r.Summary().Len() != len(ref) {
			t.Fatalf("len %d summary %d want %d", r.Len(), r.Summary().Len(), len(ref))
		}
	})
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
