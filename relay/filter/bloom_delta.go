package filter

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/bits-and-blooms/bloom/v3"
)

// Bloom deltas
//
// A Bloom filter changes only by setting bits, so a delta between two
// versions of one filter is the words of its bit array that differ,
// each shipped whole (an absolute image, as cuckoo buckets are): applying
// one is idempotent and needs no hashing on the receiver. Removals change
// nothing and are not shipped; the owner rebuilds the filter from its
// exact set to drop them (RefSet.Rebuild), which is a new layout and needs
// a full snapshot. The change log is the cuckoo filter's (changeLog),
// over words instead of buckets.

// TrackChanges starts recording which words of the bit array change, so
// that TakeChanges can build a delta in time proportional to the changes.
// Tracking costs one bit per word plus one entry per changed word.
func (b *Bloom) TrackChanges() {
	if b.changes == nil {
		b.changes = &changeLog{seen: make([]uint64, (len(b.f.BitSet().Words())+63)/64)}
	}
}

// noteWords records the words that adding key will write. The library
// sets bit Locations(key, k)[i] mod m for each i.
func (b *Bloom) noteWords(key []byte) {
	words := b.f.BitSet().Words()
	m := uint64(b.f.Cap())
	for _, loc := range bloom.Locations(key, b.f.K()) {
		w := (loc % m) / 64
		b.changes.note(w, words[w])
	}
}

// TakeChanges returns the delta from the version at the previous
// TakeChanges (or TrackChanges) to the current one and starts a new
// interval. Without tracking it returns an empty delta.
func (b *Bloom) TakeChanges() Delta {
	d := b.emptyDelta()
	if b.changes == nil {
		return d
	}
	words := b.f.BitSet().Words()
	for _, o := range b.changes.orig {
		b.changes.seen[o.Index>>6] = 0
		if w := words[o.Index]; w != o.Word {
			d.Images = append(d.Images, BucketImage{Index: o.Index, Word: w})
		}
	}
	b.changes.orig = b.changes.orig[:0]
	slices.SortFunc(d.Images, func(a, c BucketImage) int { return cmp.Compare(a.Index, c.Index) })
	return d
}

// emptyDelta returns a delta of b's geometry declaring its entry count.
func (b *Bloom) emptyDelta() Delta {
	return Delta{Kind: KindBloom, Bits: uint64(b.f.Cap()), Hashes: int(b.f.K()), Count: b.n}
}

// Apply installs every image of d. It validates the whole delta first
// (kind, bit and hash counts, sorted in-range indices, no bit past m, an
// entry count that does not shrink, since within one filter it only
// grows) and changes nothing when any check fails.
func (b *Bloom) Apply(d Delta) error {
	m, k := uint64(b.f.Cap()), int(b.f.K())
	if d.kind() != KindBloom || d.Bits != m || d.Hashes != k {
		return fmt.Errorf("%w: %v delta of %d bits, %d hashes; filter is bloom of %d bits, %d hashes",
			ErrGeometry, d.kind(), d.Bits, d.Hashes, m, k)
	}
	words := b.f.BitSet().Words()
	for i := range d.Images {
		if err := checkImage(KindBloom, uint64(len(words)), d.Images, i); err != nil {
			return err
		}
	}
	if err := checkBloomTail(m, d.Images); err != nil {
		return err
	}
	if d.Count < b.n {
		return fmt.Errorf("%w: delta declares %d entries, filter holds %d", ErrBase, d.Count, b.n)
	}
	for _, im := range d.Images {
		words[im.Index] = im.Word
	}
	b.n = d.Count
	return nil
}

// checkBloomTail reports an image of the last word of an m-bit array
// that sets a bit at or past m; images are sorted, so it is the last.
func checkBloomTail(m uint64, images []BucketImage) error {
	if len(images) == 0 || m%64 == 0 {
		return nil
	}
	if im := images[len(images)-1]; uint64(im.Index) == m/64 && im.Word>>(m%64) != 0 {
		return fmt.Errorf("%w: image of word %d sets bits beyond m=%d", ErrCorrupt, im.Index, m)
	}
	return nil
}
