package filter

import "encoding/binary"

// Bucket storage of the two cuckoo layouts. Every algorithm (insert, kick,
// delete, rollback, change tracking, deltas) sees a bucket two ways:
//
//   - its logical word, four 16-bit lanes that the SWAR helpers of
//     bucket.go search; for the compact kind the lanes hold 13-bit
//     fingerprints in ascending order;
//   - its stored image, what memory, the encoding and deltas hold: the
//     word itself for KindCuckoo, the 48-bit semi-sorted code for
//     KindCuckooCompact.
//
// bucket and set convert between the two; set and store are the only
// writers, and both note the old image, so change tracking sees every write
// of either kind.

// allocate makes the empty bucket storage of c's kind.
func (c *Cuckoo) allocate(buckets uint64) {
	if c.kind == KindCuckooCompact {
		c.packed = make([]byte, buckets*compactBucketBytes+compactPadding)
		return
	}
	c.words = make([]uint64, buckets)
}

// image returns the stored image of bucket i.
func (c *Cuckoo) image(i uint64) uint64 {
	if c.packed != nil {
		return loadImage(c.packed, i)
	}
	return c.words[i]
}

// decode turns a stored image of c's kind into its logical word.
func (c *Cuckoo) decode(im uint64) uint64 {
	if c.packed != nil {
		return unpackBucket(im)
	}
	return im
}

// bucket returns the logical word of bucket i.
func (c *Cuckoo) bucket(i uint64) uint64 {
	if c.packed != nil {
		return unpackBucket(loadImage(c.packed, i))
	}
	return c.words[i]
}

// set writes logical word w to bucket i. A compact bucket is sorted and
// packed first, which keeps it canonical whichever lane an insert, kick or
// delete changed. set is the hot write path, so it encodes and stores in
// one call.
func (c *Cuckoo) set(i, w uint64) {
	if c.changes != nil {
		c.changes.note(i, c.image(i))
	}
	if c.packed != nil {
		storeImage(c.packed, i, encodeBucket(w))
		return
	}
	c.words[i] = w
}

// store writes image im to bucket i, noting the old image in the change
// log first: the raw write of rollback, Apply and decoding.
func (c *Cuckoo) store(i, im uint64) {
	if c.changes != nil {
		c.changes.note(i, c.image(i))
	}
	if c.packed != nil {
		storeImage(c.packed, i, im)
		return
	}
	c.words[i] = im
}

// readImage reads one stored image of kind k from the start of b, in the
// little-endian form of the encoding and of memory.
func readImage(k Kind, b []byte) uint64 {
	if k == KindCuckooCompact {
		return uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint16(b[4:]))<<32
	}
	return binary.LittleEndian.Uint64(b)
}

// putImage writes one stored image of kind k at the start of b.
func putImage(k Kind, b []byte, im uint64) {
	if k == KindCuckooCompact {
		binary.LittleEndian.PutUint32(b, uint32(im))
		binary.LittleEndian.PutUint16(b[4:], uint16(im>>32))
		return
	}
	binary.LittleEndian.PutUint64(b, im)
}

// validImage reports whether im can be stored in a bucket of kind k: any
// word for KindCuckoo, a canonical 48-bit code for KindCuckooCompact.
func validImage(k Kind, im uint64) bool {
	return k != KindCuckooCompact || canonicalImage(im)
}

// occupiedImage counts the entries of a stored image of kind k.
func occupiedImage(k Kind, im uint64) int {
	if k == KindCuckooCompact {
		return occupied(unpackBucket(im))
	}
	return occupied(im)
}

// containsPacked is Contains on the compact layout. Both buckets are loaded
// and decoded before either is tested, so the two memory reads overlap
// instead of the second waiting for the first's branch.
func (c *Cuckoo) containsPacked(fp uint16, i uint64) bool {
	j := c.addr.alt(i, fp)
	a := unpackBucket(loadImage(c.packed, i))
	b := unpackBucket(loadImage(c.packed, j))
	return matchLanes(a, fp)|matchLanes(b, fp) != 0
}

// placePacked is place on the compact layout in one function: decode, the
// emptiness test, encode and store without the generic helpers' calls. A
// sorted bucket has a free slot exactly when lane 0, the smallest
// fingerprint, is 0.
func (c *Cuckoo) placePacked(i uint64, fp uint16) bool {
	w := unpackBucket(loadImage(c.packed, i))
	if w&0xffff != 0 {
		return false
	}
	if c.changes != nil {
		c.changes.note(i, c.image(i))
	}
	storeImage(c.packed, i, encodeBucket(w|uint64(fp)))
	return true
}
