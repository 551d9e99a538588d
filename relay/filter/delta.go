package filter

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
)

// BucketImage is the absolute value of one bucket after a change. Shipping
// absolute images rather than operations makes applying a delta idempotent.
// Word is the bucket's stored image: the 64-bit word of KindCuckoo, or the
// canonical 48-bit semi-sorted code of KindCuckooCompact (high 16 bits 0).
// In a Bloom delta Index names a 64-bit word of the bit array and Word is
// its value.
type BucketImage struct {
	Index uint32
	Word  uint64
}

// Delta carries the buckets that differ between two versions of one cuckoo
// filter (same kind, seed and bucket count), or the words of the bit array
// that differ between two versions of one Bloom filter (same bit count and
// hash count). Images are sorted by strictly increasing Index; Count is the
// entry count of the newer version. A zero Kind means KindCuckoo.
type Delta struct {
	Kind Kind
	// Seed and Buckets are a cuckoo filter's geometry.
	Seed    uint64
	Buckets uint64
	// Bits (m) and Hashes (k) are a Bloom filter's.
	Bits   uint64
	Hashes int
	Count  int
	Images []BucketImage
}

// kind returns d's kind with the zero value resolved to KindCuckoo.
func (d Delta) kind() Kind {
	if d.Kind == 0 {
		return KindCuckoo
	}
	return d.Kind
}

// Diff returns the delta that turns c into newer. Both filters must share
// kind, seed and bucket count; a resized or reseeded filter needs a full
// snapshot.
func (c *Cuckoo) Diff(newer *Cuckoo) (Delta, error) {
	if err := c.sameGeometry(newer.kind, newer.addr.seed, uint64(newer.Buckets())); err != nil {
		return Delta{}, err
	}
	d := c.emptyDelta(newer.count)
	for i := range uint64(c.Buckets()) {
		if im := newer.image(i); im != c.image(i) {
			d.Images = append(d.Images, BucketImage{Index: uint32(i), Word: im})
		}
	}
	return d, nil
}

// emptyDelta returns a delta of c's geometry declaring count entries.
func (c *Cuckoo) emptyDelta(count int) Delta {
	return Delta{Kind: c.kind, Seed: c.addr.seed, Buckets: uint64(c.Buckets()), Count: count}
}

// Apply installs every image of d. It validates the whole delta first
// (kind and geometry, sorted in-range indices, canonical compact images,
// the resulting entry count) and changes nothing when any check fails.
func (c *Cuckoo) Apply(d Delta) error {
	if err := c.sameGeometry(d.kind(), d.Seed, d.Buckets); err != nil {
		return err
	}
	count := c.count
	for k, im := range d.Images {
		if err := checkImage(c.kind, d.Buckets, d.Images, k); err != nil {
			return err
		}
		count += occupiedImage(c.kind, im.Word) - occupiedImage(c.kind, c.image(uint64(im.Index)))
	}
	if count != d.Count {
		return fmt.Errorf("%w: delta leaves %d entries, declares %d", ErrBase, count, d.Count)
	}
	for _, im := range d.Images {
		c.store(uint64(im.Index), im.Word)
	}
	c.count = count
	return nil
}

// checkImage validates images[k] of a delta of kind k over buckets buckets:
// index in range and above the previous one, image storable.
func checkImage(kind Kind, buckets uint64, images []BucketImage, k int) error {
	im := images[k]
	if uint64(im.Index) >= buckets || (k > 0 && im.Index <= images[k-1].Index) {
		return fmt.Errorf("%w: image %d has bucket %d out of order or range", ErrCorrupt, k, im.Index)
	}
	if !validImage(kind, im.Word) {
		return fmt.Errorf("%w: image %d of bucket %d, %#x, is not a canonical %v bucket", ErrCorrupt, k, im.Index, im.Word, kind)
	}
	return nil
}

// sameGeometry checks that kind, seed and buckets describe c's layout.
func (c *Cuckoo) sameGeometry(kind Kind, seed, buckets uint64) error {
	if kind != c.kind || seed != c.addr.seed || buckets != uint64(c.Buckets()) {
		return fmt.Errorf("%w: %v seed %#x with %d buckets, filter is %v seed %#x with %d",
			ErrGeometry, kind, seed, buckets, c.kind, c.addr.seed, c.Buckets())
	}
	return nil
}

// changeLog records, for each bucket written since the last TakeChanges,
// its stored image before the first write.
type changeLog struct {
	seen []uint64 // bitset over buckets
	orig []BucketImage
}

// note records old as bucket i's original image if i is not yet recorded.
func (l *changeLog) note(i, old uint64) {
	bit := uint64(1) << (i & 63)
	if l.seen[i>>6]&bit != 0 {
		return
	}
	l.seen[i>>6] |= bit
	l.orig = append(l.orig, BucketImage{Index: uint32(i), Word: old})
}

// TrackChanges starts recording which buckets change, so that TakeChanges
// can build a delta in time proportional to the changes instead of the
// table. Tracking costs one bit per bucket plus one entry per dirty bucket.
func (c *Cuckoo) TrackChanges() {
	if c.changes == nil {
		c.changes = &changeLog{seen: make([]uint64, (c.Buckets()+63)/64)}
	}
}

// TakeChanges returns the delta from the version at the previous
// TakeChanges (or TrackChanges) to the current one and starts a new
// interval. Buckets that were written but ended with their original image,
// such as those of a rolled-back insert, are left out. Without tracking it
// returns an empty delta.
func (c *Cuckoo) TakeChanges() Delta {
	d := c.emptyDelta(c.count)
	if c.changes == nil {
		return d
	}
	for _, o := range c.changes.orig {
		c.changes.seen[o.Index>>6] = 0
		if w := c.image(uint64(o.Index)); w != o.Word {
			d.Images = append(d.Images, BucketImage{Index: o.Index, Word: w})
		}
	}
	c.changes.orig = c.changes.orig[:0]
	slices.SortFunc(d.Images, func(a, b BucketImage) int { return cmp.Compare(a.Index, b.Index) })
	return d
}

// imageLen returns the encoded size of one image of kind k: index u32,
// then the stored image (8 bytes, or 6 for the compact kind).
func imageLen(k Kind) int { return 4 + k.bucketBytes() }

// MarshalBinary encodes d: a frame of d's kind with the delta flag whose
// body is the image count (u32) followed by the images. A compact delta
// holding a non-canonical image is refused with ErrCorrupt, since it could
// not be decoded.
func (d Delta) MarshalBinary() ([]byte, error) {
	h, err := d.frameHeader()
	if err != nil {
		return nil, err
	}
	size := imageLen(h.kind)
	if len(d.Images) > (1<<32-1-4)/size {
		return nil, fmt.Errorf("%w: %d images exceed one frame", ErrUnsupported, len(d.Images))
	}
	for k := range d.Images {
		if !validImage(h.kind, d.Images[k].Word) {
			return nil, checkImage(h.kind, imageSlots(h), d.Images, k)
		}
	}
	h.bodyLen = uint32(4 + size*len(d.Images))
	return encodeFrame(h, func(body []byte) {
		binary.LittleEndian.PutUint32(body, uint32(len(d.Images)))
		for k, im := range d.Images {
			binary.LittleEndian.PutUint32(body[4+size*k:], im.Index)
			putImage(h.kind, body[8+size*k:], im.Word)
		}
	}), nil
}

// frameHeader returns d's frame header without its body length, after
// checking d's geometry.
func (d Delta) frameHeader() (header, error) {
	kind := d.kind()
	if d.Count < 0 {
		return header{}, fmt.Errorf("%w: %v delta with count %d", ErrGeometry, kind, d.Count)
	}
	if kind == KindBloom {
		h := header{kind: kind, flags: flagDelta, size: d.Bits, p1: uint8(d.Hashes), count: uint64(d.Count)}
		if d.Hashes < 1 || d.Hashes > maxBloomHashes || checkBloomGeometry(h) != nil {
			return header{}, fmt.Errorf("%w: bloom delta for %d bits, %d hashes", ErrGeometry, d.Bits, d.Hashes)
		}
		return h, nil
	}
	if !kind.IsCuckoo() || d.Buckets < 2 || d.Buckets > maxBuckets || d.Buckets&(d.Buckets-1) != 0 {
		return header{}, fmt.Errorf("%w: %v delta for %d buckets", ErrGeometry, kind, d.Buckets)
	}
	return header{kind: kind, flags: flagDelta, seed: d.Seed, size: d.Buckets,
		p0: uint8(kind.fingerprintWidth()), p1: slotsPerBucket, count: uint64(d.Count)}, nil
}

// imageSlots is the number of images a filter of h's geometry has: its
// buckets, or the 64-bit words of a Bloom filter's bit array.
func imageSlots(h header) uint64 {
	if h.kind == KindBloom {
		return (h.size + 63) / 64
	}
	return h.size
}

// DecodeDelta parses a delta of any kind produced by Delta.MarshalBinary,
// checking that indices are in range and strictly increasing, that compact
// images are canonical and that a Bloom delta sets no bit past its bit
// count.
func DecodeDelta(data []byte) (Delta, error) {
	h, body, err := decodeFrame(data)
	if err != nil {
		return Delta{}, err
	}
	if !h.kind.HasDeltas() || h.flags != flagDelta {
		return Delta{}, fmt.Errorf("%w: kind %v flags %#x, want a delta", ErrCorrupt, h.kind, h.flags)
	}
	if err := checkDeltaGeometry(h); err != nil {
		return Delta{}, err
	}
	size := uint64(imageLen(h.kind))
	if len(body) < 4 || uint64(len(body)-4) != uint64(binary.LittleEndian.Uint32(body))*size {
		return Delta{}, fmt.Errorf("%w: delta body of %d bytes does not match its image count", ErrCorrupt, len(body))
	}
	return decodeImages(h, body[4:])
}

// checkDeltaGeometry validates a delta header's geometry and entry count.
func checkDeltaGeometry(h header) error {
	if h.kind == KindBloom {
		return checkBloomGeometry(h)
	}
	if err := checkCuckooGeometry(h); err != nil {
		return err
	}
	if h.count > h.size*slotsPerBucket {
		return fmt.Errorf("%w: count %d exceeds %d slots", ErrCorrupt, h.count, h.size*slotsPerBucket)
	}
	return nil
}

// decodeImages reads and validates the images of a delta body.
func decodeImages(h header, raw []byte) (Delta, error) {
	size := imageLen(h.kind)
	d := Delta{Kind: h.kind, Count: int(h.count), Images: make([]BucketImage, len(raw)/size)}
	if h.kind == KindBloom {
		d.Bits, d.Hashes = h.size, int(h.p1)
	} else {
		d.Seed, d.Buckets = h.seed, h.size
	}
	for k := range d.Images {
		d.Images[k] = BucketImage{Index: binary.LittleEndian.Uint32(raw[size*k:]), Word: readImage(h.kind, raw[size*k+4:])}
		if err := checkImage(h.kind, imageSlots(h), d.Images, k); err != nil {
			return Delta{}, err
		}
	}
	if h.kind == KindBloom {
		return d, checkBloomTail(h.size, d.Images)
	}
	return d, nil
}
