package filter

import (
	"testing"

	"github.com/kvrouter/kvrouter/routing"
)

// TestStackIsContains: a stack loaded from filters of one geometry, then
// fed the deltas those filters' replicas accept, answers every block in
// every column as the replica's Contains does, by StackHits over all
// columns and by Contains for one; SameGeometry agrees with Fits.
func TestStackIsContains(t *testing.T) {
	for _, kind := range cuckooKinds {
		t.Run(kind.String(), func(t *testing.T) {
			rng := newRand(21)
			const members = 5
			var srcs, replicas [members]*Cuckoo
			var inserted [members][]routing.SeqHash
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
			if s.Width() != 8 {
				t.Fatalf("width %d, want 8", s.Width())
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
			StackHits(ps, masks, 1<<MaxStackWidth-1)
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
		})
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

// BenchmarkStackLoad is the cost of loading one 2^19-bucket filter (the
// relay's default summary size) into a column of a 16-wide stack, which
// a consumer does under its domain's write lock for every snapshot of a
// stacked lane; it is reported per bucket too.
func BenchmarkStackLoad(b *testing.B) {
	c := mustCuckoo(b, 1<<19, 1)
	fillTo(b, c, newRand(5), 0.75)
	s, err := NewStack(c, MaxStackWidth)
	if err != nil {
		b.Fatal(err)
	}
	k := 0
	for b.Loop() {
		s.Load(k%MaxStackWidth, c)
		k++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(c.Buckets()), "ns/bucket")
}
