package filter

import (
	"testing"

	"pgregory.net/rapid"
)

// packBucket encodes a logical word whose lanes hold sorted 13-bit
// fingerprints as its 48-bit image: encodeBucket without the sort, which
// the tests use to build images of chosen lanes.
func packBucket(w uint64) uint64 {
	return packLanes(int32(uint16(w)), int32(uint16(w>>16)), int32(uint16(w>>32)), int32(uint16(w>>48)))
}

// TestNibbleRankIsBijection ranks every sorted nibble quadruple and checks
// that the ranks are exactly 0..3875 and that unranking inverts ranking.
func TestNibbleRankIsBijection(t *testing.T) {
	seen := make(map[uint64]bool)
	for q := range 1 << 16 {
		n0, n1, n2, n3 := q&15, q>>4&15, q>>8&15, q>>12
		if n0 > n1 || n1 > n2 || n2 > n3 {
			continue
		}
		r := rankOf(uint16(q))
		if r >= sortedNibbleSets || seen[r] {
			t.Fatalf("quadruple %#04x: rank %d out of range or repeated", q, r)
		}
		seen[r] = true
		if got := nibbleUnrank[r]; got != uint16(q) {
			t.Fatalf("unrank(%d) = %#04x, want %#04x", r, got, q)
		}
	}
	if len(seen) != sortedNibbleSets {
		t.Fatalf("%d sorted quadruples, want %d", len(seen), sortedNibbleSets)
	}
}

// fingerprintWord draws a logical word of four 13-bit lanes, empty lanes
// (0) included.
func fingerprintWord(t *rapid.T) uint64 {
	var w uint64
	for s := range uint(slotsPerBucket) {
		fp := rapid.OneOf(rapid.Just(uint64(0)), rapid.Uint64Range(1, 1<<compactFingerprintBits-1)).Draw(t, "fp")
		w |= fp << (laneBits * s)
	}
	return w
}

// TestPackBucketRoundTrip checks that every sorted bucket packs into a
// canonical 48-bit image that unpacks to the same word, with the same
// occupancy.
func TestPackBucketRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := sortLanes(fingerprintWord(t))
		im := packBucket(w)
		if !canonicalImage(im) {
			t.Fatalf("image %#x of %#x is not canonical", im, w)
		}
		if got := unpackBucket(im); got != w {
			t.Fatalf("unpack(pack(%#016x)) = %#016x", w, got)
		}
		if occupiedImage(KindCuckooCompact, im) != occupied(w) {
			t.Fatal("occupancy changed by packing")
		}
	})
}

// TestSortLanes checks the sorting network against the definition: output
// ascending and a permutation of the input.
func TestSortLanes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := rapid.Uint64().Draw(t, "w")
		s := sortLanes(w)
		count := map[uint16]int{}
		for k := range uint(slotsPerBucket) {
			count[uint16(w>>(laneBits*k))]++
			count[uint16(s>>(laneBits*k))]--
			if k > 0 && uint16(s>>(laneBits*k)) < uint16(s>>(laneBits*(k-1))) {
				t.Fatalf("sortLanes(%#x) = %#x is not ascending", w, s)
			}
		}
		for v, n := range count {
			if n != 0 {
				t.Fatalf("sortLanes(%#x) = %#x changed the count of %#x", w, s, v)
			}
		}
	})
}

func TestCanonicalImageRejects(t *testing.T) {
	sorted := packBucket(sortLanes(0x0201_0200_0100_0001)) // nibbles 0,0,1,1
	tests := []struct {
		name string
		im   uint64
		want bool
	}{
		{name: "empty bucket", im: 0, want: true},
		{name: "sorted bucket", im: sorted, want: true},
		{name: "rank 3876", im: sortedNibbleSets, want: false},
		{name: "rank 4095", im: rankMask, want: false},
		{name: "bit 48 set", im: sorted | 1<<48, want: false},
		// Equal nibbles (all 0) with remainders 1, 0: sorted by nibble
		// but not by whole fingerprint, a second image of one multiset.
		{name: "remainders out of order", im: 1 << rankBits, want: false},
		{name: "remainders in order", im: 1 << (rankBits + 27), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := canonicalImage(tt.im); got != tt.want {
				t.Fatalf("canonicalImage(%#x) = %v, want %v", tt.im, got, tt.want)
			}
		})
	}
}

// FuzzCompactBucket checks the bucket codec on arbitrary 64-bit images
// against a reference: an image is accepted exactly when it is the packing
// of its own sorted decoding, and accepted images round-trip.
func FuzzCompactBucket(f *testing.F) {
	for _, im := range []uint64{0, 1, rankMask, sortedNibbleSets - 1, imageMask, 1 << rankBits, packBucket(0x1fff_1000_0200_0001)} {
		f.Add(im)
	}
	f.Fuzz(func(t *testing.T, im uint64) {
		ok := canonicalImage(im)
		ref := im <= imageMask && im&rankMask < sortedNibbleSets && packBucket(sortLanes(unpackBucket(im))) == im
		if ok != ref {
			t.Fatalf("canonicalImage(%#x) = %v, reference %v", im, ok, ref)
		}
		if ok && packBucket(unpackBucket(im)) != im {
			t.Fatalf("accepted image %#x does not round-trip", im)
		}
	})
}
