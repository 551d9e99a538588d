package filter

import (
	"fmt"
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// TestStackIsContains: a stack loaded from filters of one geometry, then
// fed the deltas those filters' replicas accept, answers every block in
// every column as the replica's Contains does, by Hits over all columns
// or some (by the AVX2 kernel where the machine has it and the row is
// four words or more, and by the portable loop) and by Contains for one;
// SameGeometry agrees with Fits.
func TestStackIsContains(t *testing.T) {
	for _, kind := range cuckooKinds {
		for _, members := range []int{2, 5, 13} {
			t.Run(fmt.Sprintf("%v/%d", kind, members), func(t *testing.T) { testStackIsContains(t, kind, members) })
		}
	}
}

func testStackIsContains(t *testing.T, kind Kind, members int) {
	rng := newRand(21)
	srcs, replicas := make([]*Cuckoo, members), make([]*Cuckoo, members)
	inserted := make([][]routing.SeqHash, members)
	for k := range srcs {
		srcs[k] = mustCuckooOf(t, kind, 1<<9, 3)
		inserted[k] = fillTo(t, srcs[k], rng, 0.5)
		data, err := srcs[k].MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if replicas[k], err = DecodeCuckoo(data); err != nil {
			t.Fatal(err)
		}
		srcs[k].TrackChanges()
	}
	s, err := NewStack(replicas[0], members)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int]int{2: 2, 5: 8, 13: 16}[members]; s.Width() != want {
		t.Fatalf("width %d, want %d", s.Width(), want)
	}
	for k, r := range replicas {
		if !s.Fits(r) {
			t.Fatalf("column %d does not fit", k)
		}
		s.Load(k, r)
	}
	// Changes after the load reach the stack as deltas: more
	// inserts, and deletes of half of what each member held.
	for k := range srcs {
		for _, h := range randomHashes(rng, 300) {
			if err := srcs[k].Insert(h); err != nil {
				t.Fatal(err)
			}
			inserted[k] = append(inserted[k], h)
		}
		for _, h := range inserted[k][:len(inserted[k])/2] {
			if err := srcs[k].Delete(h); err != nil {
				t.Fatal(err)
			}
		}
		d := srcs[k].TakeChanges()
		if err := replicas[k].Apply(d); err != nil {
			t.Fatal(err)
		}
		s.Apply(k, d)
	}
	var probes []routing.SeqHash
	for k := range inserted {
		probes = append(probes, inserted[k]...)
	}
	probes = append(probes, randomHashes(newRand(22), 4000)...)
	ps := make([]StackProbe, len(probes))
	for n, h := range probes {
		s.LocateInto(&ps[n], h)
	}
	masks := make([]uint32, len(ps))
	for n := range masks {
		masks[n] = 1<<MaxStackWidth - 1
	}
	s.Hits(ps, masks)
	// Some columns only, by both paths: of both lines of a row (8
	// columns each), of the second only, of the first only, and a
	// different set for each probe.
	sets := []uint32{0xaaaa, 0x0f00, 0x0081, 0x0001}
	for i := range sets {
		some, words := make([]uint32, len(ps)), make([]uint32, len(ps))
		for n := range ps {
			some[n] = sets[(i+n)%len(sets)]
			words[n] = some[n]
		}
		s.Hits(ps, some)
		s.hitsWords(ps, words)
		for n := range ps {
			cols := sets[(i+n)%len(sets)]
			if some[n] != masks[n]&cols || words[n] != some[n] {
				t.Fatalf("block %d: Hits over columns %#x: %#x, portable %#x, all columns %#x", n, cols, some[n], words[n], masks[n])
			}
		}
	}
	hits := 0
	for n, h := range probes {
		for k, r := range replicas {
			want := r.Contains(h)
			if got := masks[n]>>k&1 == 1; got != want {
				t.Fatalf("block %d, column %d: stack %v, filter %v", n, k, got, want)
			}
			if got := s.Contains(k, h); got != want {
				t.Fatalf("block %d, column %d: Contains %v, filter %v", n, k, got, want)
			}
			if want {
				hits++
			}
		}
		if masks[n]>>members != 0 {
			t.Fatalf("block %d: mask %#x has columns past the members", n, masks[n])
		}
	}
	if hits == 0 {
		t.Fatal("no block was present anywhere")
	}
}

// TestStackGeometry: only filters of the stack's kind, seed and bucket
// count fit, and the width is bounded.
func TestStackGeometry(t *testing.T) {
	like := mustCuckoo(t, 1<<8, 1)
	s, err := NewStack(like, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		c    *Cuckoo
		fits bool
	}{
		{name: "same geometry", c: mustCuckoo(t, 1<<8, 1), fits: true},
		{name: "other seed", c: mustCuckoo(t, 1<<8, 2)},
		{name: "other bucket count", c: mustCuckoo(t, 1<<9, 1)},
		{name: "other kind", c: mustCuckooOf(t, KindCuckooCompact, 1<<8, 1)},
		{name: "none", c: nil},
	} {
		if got := s.Fits(tt.c); got != tt.fits {
			t.Errorf("%s: Fits %v, want %v", tt.name, got, tt.fits)
		}
		if tt.c != nil && like.SameGeometry(tt.c) != tt.fits {
			t.Errorf("%s: SameGeometry %v, want %v", tt.name, !tt.fits, tt.fits)
		}
	}
	for _, w := range []int{0, MaxStackWidth + 1} {
		if _, err := NewStack(like, w); err == nil {
			t.Errorf("width %d accepted", w)
		}
	}
}

// benchStack returns a 2^19-bucket filter (the relay's default summary
// size) filled to 75%, and an empty 16-wide stack of its geometry.
func benchStack(b *testing.B) (*Cuckoo, *Stack) {
	c := mustCuckoo(b, 1<<19, 1)
	fillTo(b, c, newRand(5), 0.75)
	s, err := NewStack(c, MaxStackWidth)
	if err != nil {
		b.Fatal(err)
	}
	return c, s
}

// BenchmarkStackLoad is the cost of loading one 2^19-bucket filter (the
// relay's default summary size) into a column of a 16-wide stack, which
// a consumer does under its domain's write lock for every snapshot of a
// stacked lane; it is reported per bucket too.
func BenchmarkStackLoad(b *testing.B) {
	c, s := benchStack(b)
	k := 0
	for b.Loop() {
		s.Load(k%MaxStackWidth, c)
		k++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(c.Buckets()), "ns/bucket")
}

// BenchmarkStackHits is one Hits call of 8 and of 16 probes on a 16-wide
// stack of 2^19-bucket filters (the relay's default summary size), for
// the same probes every time (hot) and for probes of 65,536 blocks in
// turn (cold), by the path this machine takes (Hits: the AVX2 kernel on
// amd64 where the machine has it) and by the portable loop in the same
// run. It is reported per probe too.
func BenchmarkStackHits(b *testing.B) {
	c, s := benchStack(b)
	for k := range MaxStackWidth {
		s.Load(k, c)
	}
	hs := randomHashes(newRand(9), 1<<16)
	paths := []struct {
		name string
		hits func(ps []StackProbe, masks []uint32)
	}{{"hits", s.Hits}, {"portable", s.hitsWords}}
	for _, path := range paths {
		for _, hot := range []bool{true, false} {
			for _, n := range []int{8, 16} {
				name := fmt.Sprintf("%s/cold/%d-probes", path.name, n)
				if hot {
					name = fmt.Sprintf("%s/hot/%d-probes", path.name, n)
				}
				b.Run(name, func(b *testing.B) {
					ps := make([]StackProbe, n)
					masks := make([]uint32, n)
					next := 0
					for b.Loop() {
						for q := range ps {
							s.LocateInto(&ps[q], hs[(next+q)%len(hs)])
						}
						if !hot {
							next += n
						}
						for q := range masks {
							masks[q] = 1<<MaxStackWidth - 1
						}
						path.hits(ps, masks)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/probe")
				})
			}
		}
	}
}
