package filter

import (
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/kvrouter/kvrouter/routing"
)

func TestCuckooBasics(t *testing.T) {
	tests := []struct {
		name      string
		inserts   []routing.SeqHash
		deletes   []routing.SeqHash
		want      []routing.SeqHash // must be present afterwards
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
			c := mustCuckoo(t, 64, 1)
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
			for _, h := range tt.want {
				if !c.Contains(h) {
					t.Errorf("Contains(%d) = false", h)
				}
			}
			if c.Len() != tt.wantLen {
				t.Errorf("Len = %d, want %d", c.Len(), tt.wantLen)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{name: "no capacity", cfg: Config{}},
		{name: "unknown kind", cfg: Config{Kind: 9, Capacity: 10}},
		{name: "kicks too high", cfg: Config{Capacity: 10, MaxKicks: MaxMaxKicks + 1}},
		{name: "load too high", cfg: Config{Capacity: 10, TargetLoad: 0.99}},
		{name: "fp rate 1", cfg: Config{Capacity: 10, BloomFPRate: 1}},
		{name: "cuckoo beyond one frame", cfg: Config{Capacity: 1 << 30, TargetLoad: 0.01}},
		{name: "bloom beyond one frame", cfg: Config{Kind: KindBloom, Capacity: 1 << 30, BloomFPRate: 1e-300}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := newSummary(tt.cfg, nil); !errors.Is(err, ErrConfig) {
				t.Fatalf("New = %v, want ErrConfig", err)
			}
		})
	}
}

// TestCuckooNoFalseNegatives runs a long random insert/delete sequence at
// high load against a reference multiset.
func TestCuckooNoFalseNegatives(t *testing.T) {
	rng := newRand(42)
	c := mustCuckoo(t, 1024, 42)
	ref := map[routing.SeqHash]int{}
	var live []routing.SeqHash
	for step := range 200_000 {
		if len(live) > 0 && (rng.IntN(2) == 0 || c.LoadFactor() > 0.93) {
			k := rng.IntN(len(live))
			h := live[k]
			if err := c.Delete(h); err != nil {
				t.Fatalf("step %d: delete of present %#x: %v", step, h, err)
			}
			if ref[h]--; ref[h] == 0 {
				delete(ref, h)
			}
			live[k] = live[len(live)-1]
			live = live[:len(live)-1]
			continue
		}
		h := routing.SeqHash(rng.Uint64())
		if len(live) > 0 && rng.IntN(8) == 0 {
			h = live[rng.IntN(len(live))] // a duplicate copy
		}
		if err := c.Insert(h); err != nil {
			t.Fatalf("step %d at load %.3f: %v", step, c.LoadFactor(), err)
		}
		ref[h]++
		live = append(live, h)
	}
	for h := range ref {
		if !c.Contains(h) {
			t.Fatalf("false negative for %#x", h)
		}
	}
	if c.Len() != len(live) {
		t.Fatalf("Len = %d, reference holds %d", c.Len(), len(live))
	}
}

// TestCuckooPropertyNoFalseNegatives checks the same with rapid-chosen
// sequences on a tiny table, where kicks and failures are frequent.
func TestCuckooPropertyNoFalseNegatives(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := mustCuckoo(t, 4, rapid.Uint64().Draw(t, "seed"))
		var live []routing.SeqHash
		ops := rapid.SliceOfN(rapid.Uint64Range(0, 40), 1, 200).Draw(t, "ops")
		for _, op := range ops {
			if op < 12 && len(live) > 0 {
				k := int(op) % len(live)
				if err := c.Delete(live[k]); err != nil {
					t.Fatalf("delete of present: %v", err)
				}
				live = slices.Delete(live, k, k+1)
				continue
			}
			h := routing.SeqHash(op * 0x9E3779B97F4A7C15)
			before := slices.Clone(c.words)
			if err := c.Insert(h); err != nil {
				if !errors.Is(err, ErrFull) || !slices.Equal(before, c.words) {
					t.Fatalf("failed insert changed the filter or wrong error: %v", err)
				}
				continue
			}
			live = append(live, h)
		}
		for _, h := range live {
			if !c.Contains(h) {
				t.Fatalf("false negative for %#x", h)
			}
		}
		if c.Len() != len(live) {
			t.Fatalf("Len = %d, want %d", c.Len(), len(live))
		}
	})
}

// TestCuckooRollback fills a table until an insert fails and checks that
// the failed insert left every bucket, the count and the change log as
// they were.
func TestCuckooRollback(t *testing.T) {
	rng := newRand(7)
	c := mustCuckoo(t, 16, 7)
	c.maxKicks = 20
	c.TrackChanges()
	var kept []routing.SeqHash
	failures := 0
	for _, h := range randomHashes(rng, 200) {
		before, n := slices.Clone(c.words), c.Len()
		c.TakeChanges()
		err := c.Insert(h)
		if err == nil {
			kept = append(kept, h)
			continue
		}
		failures++
		if !errors.Is(err, ErrFull) {
			t.Fatalf("insert error %v, want ErrFull", err)
		}
		if !slices.Equal(before, c.words) || c.Len() != n {
			t.Fatal("failed insert changed the filter")
		}
		if d := c.TakeChanges(); len(d.Images) != 0 {
			t.Fatalf("failed insert left %d changed buckets", len(d.Images))
		}
	}
	if failures == 0 {
		t.Fatal("table never filled: the rollback path was not exercised")
	}
	for _, h := range kept {
		if !c.Contains(h) {
			t.Fatalf("false negative for %#x after rollbacks", h)
		}
	}
	t.Logf("%d failed inserts; final load %.3f", failures, c.LoadFactor())
}

// TestInsertLooksAhead checks the eviction look-ahead: an insert whose two
// buckets are full, where some fingerprint of the first can move to an
// empty lane of its alternate, completes with exactly two bucket writes
// and no random walk (the rng is not consulted), and loses nothing.
func TestInsertLooksAhead(t *testing.T) {
	for _, kind := range []Kind{KindCuckoo, KindCuckooCompact} {
		t.Run(kind.String(), func(t *testing.T) {
			rng := newRand(11)
			c, err := NewCuckoo(Config{Kind: kind, Capacity: 1 << 12, Seed: 11}, rng)
			if err != nil {
				t.Fatal(err)
			}
			keys := fillTo(t, c, rng, 0.9)
			c.TrackChanges()
			tried := 0
			for _, h := range randomHashes(newRand(12), 1<<16) {
				fp, i := c.addr.locate(h)
				j := c.addr.alt(i, fp)
				if zeroLanes(c.bucket(i)) != 0 || zeroLanes(c.bucket(j)) != 0 || !hasMovable(c, i) {
					continue
				}
				tried++
				c.TakeChanges()
				c.rng = nil // a random walk would dereference it
				if err := c.Insert(h); err != nil {
					t.Fatal(err)
				}
				if d := c.TakeChanges(); len(d.Images) != 2 {
					t.Fatalf("look-ahead insert wrote %d buckets, want 2", len(d.Images))
				}
				keys = append(keys, h)
				break
			}
			if tried == 0 {
				t.Fatal("no insert needed a look-ahead move: the case was not exercised")
			}
			for _, h := range keys {
				if !c.Contains(h) {
					t.Fatalf("false negative for %#x", h)
				}
			}
		})
	}
}

// hasMovable reports whether a fingerprint of bucket i has room in its
// alternate bucket.
func hasMovable(c *Cuckoo, i uint64) bool {
	w := c.bucket(i)
	for s := uint(0); s < 64; s += laneBits {
		if zeroLanes(c.bucket(c.addr.alt(i, uint16(w>>s)))) != 0 {
			return true
		}
	}
	return false
}

// TestCuckooFalsePositiveRate fills 2^14 buckets to 95% of the slots and
// checks the measured false-positive rate against 1-(1-1/65535)^(8α).
func TestCuckooFalsePositiveRate(t *testing.T) {
	rng := newRand(95)
	c := mustCuckoo(t, 1<<14, 95)
	keys := fillTo(t, c, rng, 0.95)
	if c.LoadFactor() < 0.95-1e-3 {
		t.Fatalf("load %.4f, want >= 0.95", c.LoadFactor())
	}
	got, want := measureFP(c, rng, 1_000_000, setOf(keys)), c.FalsePositiveRate()
	t.Logf("cuckoo at load %.4f: measured FP %.3g, formula %.3g, %.2f bits/entry", c.LoadFactor(), got, want, float64(8*c.SizeBytes())/float64(c.Len()))
	if got > 1e-3 || got < 0.6*want || got > 1.4*want {
		t.Fatalf("measured FP %.3g, formula %.3g", got, want)
	}
}

func TestContainsPrefix(t *testing.T) {
	c := mustCuckoo(t, 256, 3)
	chain := randomHashes(newRand(3), 24)
	for _, h := range chain[:10] {
		if err := c.Insert(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Insert(chain[12]); err != nil { // present after a gap
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		query []routing.SeqHash
		want  int
	}{
		{name: "empty", query: nil, want: 0},
		{name: "first absent", query: chain[10:], want: 0},
		{name: "stops at first miss", query: chain, want: 10},
		{name: "all present", query: chain[:10], want: 10},
		{name: "gap hides later hit", query: chain[9:13], want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.ContainsPrefix(tt.query); got != tt.want {
				t.Fatalf("ContainsPrefix = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestAltIsInvolution pins the partial-key property the eviction walk
// relies on: alt(alt(i)) = i and alt(i) != i.
func TestAltIsInvolution(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		log2 := rapid.IntRange(1, 32).Draw(t, "log2")
		a := newAddressing(rapid.Uint64().Draw(t, "seed"), uint64(1)<<log2, uint(rapid.SampledFrom([]int{fingerprintBits, compactFingerprintBits}).Draw(t, "bits")))
		fp, i := a.locate(routing.SeqHash(rapid.Uint64().Draw(t, "h")))
		j := a.alt(i, fp)
		if fp == 0 || j == i || j > a.mask || a.alt(j, fp) != i {
			t.Fatalf("fp %d i %d alt %d alt(alt) %d", fp, i, j, a.alt(j, fp))
		}
	})
}

// TestHitAllIsContains: the batched lookup answers what Contains does,
// for inserted blocks, deleted ones and blocks never inserted, on both
// cuckoo kinds at high load, with probes of two filters interleaved and
// batches longer than one read loop.
func TestHitAllIsContains(t *testing.T) {
	for _, kind := range cuckooKinds {
		t.Run(kind.String(), func(t *testing.T) {
			rng := newRand(11)
			var fs [2]*Cuckoo
			for n := range fs {
				fs[n] = mustCuckooOf(t, kind, 1<<10, uint64(7+n))
				hs := randomHashes(rng, 3800)
				for _, h := range hs[:3600] {
					if err := fs[n].Insert(h); err != nil {
						t.Fatal(err)
					}
				}
				for _, h := range hs[:400] {
					if err := fs[n].Delete(h); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Every block inserted into either filter, and as many never
			// inserted, probed in both.
			rng = newRand(11)
			hs := append(append(randomHashes(rng, 3800), randomHashes(rng, 3800)...), randomHashes(newRand(12), 7600)...)
			var ps []Probe
			var want []uint64
			for _, h := range hs {
				for _, f := range fs {
					var p Probe
					f.LocateInto(&p, h)
					ps = append(ps, p)
					want = append(want, map[bool]uint64{true: 1, false: 0}[f.Contains(h)])
				}
			}
			got := make([]uint64, len(ps))
			HitAll(ps, got)
			hits := 0
			for k := range ps {
				if got[k] != want[k] {
					t.Fatalf("probe %d: HitAll %d, Contains %d", k, got[k], want[k])
				}
				hits += int(want[k])
			}
			if hits < 6400 {
				t.Fatalf("only %d hits: the test did not exercise present blocks", hits)
			}
		})
	}
}
