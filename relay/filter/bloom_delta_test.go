package filter

import (
	"bytes"
	"errors"
	"testing"
)

// TestBloomDeltasReproduceTheFilter: a copy of a Bloom filter that applies
// the decoded deltas of every batch of adds ends byte for byte equal to
// the original, each delta holds only changed words, and an empty batch
// has no images.
func TestBloomDeltasReproduceTheFilter(t *testing.T) {
	for _, m := range []int{1000, 1 << 12} { // a partial last word, and none
		src := mustBloom(t, m, 1e-3)
		base, _ := src.MarshalBinary()
		replica, err := DecodeBloom(base)
		if err != nil {
			t.Fatal(err)
		}
		src.TrackChanges()
		rng := newRand(uint64(m))
		for batch := range 20 {
			before, _ := src.MarshalBinary()
			for _, h := range randomHashes(rng, batch%5*7) {
				src.Add(h)
			}
			d := src.TakeChanges()
			if batch%5 == 0 && len(d.Images) != 0 {
				t.Fatalf("empty batch shipped %d images", len(d.Images))
			}
			data, err := d.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeDelta(data)
			if err != nil {
				t.Fatal(err)
			}
			if err := replica.Apply(got); err != nil {
				t.Fatalf("batch %d: %v", batch, err)
			}
			after, _ := src.MarshalBinary()
			mirrored, _ := replica.MarshalBinary()
			if !bytes.Equal(after, mirrored) {
				t.Fatalf("m=%d batch %d: replica differs from the source", m, batch)
			}
			if changed := differingWords(before, after); changed != len(d.Images) {
				t.Fatalf("batch %d: %d images for %d changed words", batch, len(d.Images), changed)
			}
		}
	}
}

// differingWords counts the 8-byte body words in which two encodings of
// one Bloom filter differ.
func differingWords(a, b []byte) int {
	n := 0
	for i := headerLen; i+8 <= len(a)-trailerLen; i += 8 {
		if !bytes.Equal(a[i:i+8], b[i:i+8]) {
			n++
		}
	}
	return n
}

// TestBloomApplyRefuses: a delta of another geometry or kind, with an
// index out of order or range, with bits past m, or declaring fewer
// entries than the filter holds, is refused and changes nothing.
func TestBloomApplyRefuses(t *testing.T) {
	b := mustBloom(t, 1000, 1e-3) // m is not a multiple of 64
	b.Add(7)
	geo := b.emptyDelta()
	last := uint32(b.Bits() / 64)
	tests := []struct {
		name string
		d    Delta
		want error
	}{
		{name: "other bit count", d: Delta{Kind: KindBloom, Bits: geo.Bits + 64, Hashes: geo.Hashes, Count: 1}, want: ErrGeometry},
		{name: "other hash count", d: Delta{Kind: KindBloom, Bits: geo.Bits, Hashes: geo.Hashes + 1, Count: 1}, want: ErrGeometry},
		{name: "cuckoo delta", d: Delta{Kind: KindCuckoo, Buckets: 64, Count: 1}, want: ErrGeometry},
		{name: "index out of range", d: withImages(geo, BucketImage{Index: last + 1, Word: 1}), want: ErrCorrupt},
		{name: "unsorted", d: withImages(geo, BucketImage{Index: 3, Word: 1}, BucketImage{Index: 2, Word: 1}), want: ErrCorrupt},
		{name: "bits past m", d: withImages(geo, BucketImage{Index: last, Word: ^uint64(0)}), want: ErrCorrupt},
		{name: "fewer entries", d: Delta{Kind: KindBloom, Bits: geo.Bits, Hashes: geo.Hashes, Count: 0}, want: ErrBase},
	}
	before, _ := b.MarshalBinary()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := b.Apply(tt.d); !errors.Is(err, tt.want) {
				t.Fatalf("Apply = %v, want %v", err, tt.want)
			}
			if after, _ := b.MarshalBinary(); !bytes.Equal(before, after) {
				t.Fatal("refused delta changed the filter")
			}
		})
	}
}

// withImages returns d with images.
func withImages(d Delta, images ...BucketImage) Delta {
	d.Images = images
	return d
}
