package filter

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
)

// BucketImage is the absolute value of one bucket after a change. Shipping
// absolute images rather than operations makes applying a delta idempotent.
type BucketImage struct {
	Index uint32
	Word  uint64
}

// Delta carries the buckets that differ between two versions of one cuckoo
// filter (same seed and bucket count). Images are sorted by strictly
// increasing Index; Count is the entry count of the newer version.
type Delta struct {
	Seed    uint64
	Buckets uint64
	Count   int
	Images  []BucketImage
}

// Diff returns the delta that turns c into newer. Both filters must share
// seed and bucket count; a resized or reseeded filter needs a full snapshot.
func (c *Cuckoo) Diff(newer *Cuckoo) (Delta, error) {
	if err := c.sameGeometry(newer.addr.seed, uint64(len(newer.words))); err != nil {
		return Delta{}, err
	}
	d := Delta{Seed: c.addr.seed, Buckets: uint64(len(c.words)), Count: newer.count}
	for i, w := range newer.words {
		if w != c.words[i] {
			d.Images = append(d.Images, BucketImage{Index: uint32(i), Word: w})
		}
	}
	return d, nil
}

// Apply installs every image of d. It validates the whole delta first
// (geometry, sorted in-range indices, the resulting entry count) and changes
// nothing when any check fails.
func (c *Cuckoo) Apply(d Delta) error {
	if err := c.sameGeometry(d.Seed, d.Buckets); err != nil {
		return err
	}
	count := c.count
	for k, im := range d.Images {
		if uint64(im.Index) >= d.Buckets || (k > 0 && im.Index <= d.Images[k-1].Index) {
			return fmt.Errorf("%w: image %d has bucket %d out of order or range", ErrCorrupt, k, im.Index)
		}
		count += occupied(im.Word) - occupied(c.words[im.Index])
	}
	if count != d.Count {
		return fmt.Errorf("%w: delta leaves %d entries, declares %d", ErrBase, count, d.Count)
	}
	for _, im := range d.Images {
		c.set(uint64(im.Index), im.Word)
	}
	c.count = count
	return nil
}

// sameGeometry checks that seed and buckets describe c's layout.
func (c *Cuckoo) sameGeometry(seed, buckets uint64) error {
	if seed != c.addr.seed || buckets != uint64(len(c.words)) {
		return fmt.Errorf("%w: seed %#x with %d buckets, filter has seed %#x with %d",
			ErrGeometry, seed, buckets, c.addr.seed, len(c.words))
	}
	return nil
}

// changeLog records, for each bucket written since the last TakeChanges,
// its word before the first write.
type changeLog struct {
	seen []uint64 // bitset over buckets
	orig []BucketImage
}

// note records old as bucket i's original word if i is not yet recorded.
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
		c.changes = &changeLog{seen: make([]uint64, (len(c.words)+63)/64)}
	}
}

// TakeChanges returns the delta from the version at the previous
// TakeChanges (or TrackChanges) to the current one and starts a new
// interval. Buckets that were written but ended with their original word,
// such as those of a rolled-back insert, are left out. Without tracking it
// returns an empty delta.
func (c *Cuckoo) TakeChanges() Delta {
	d := Delta{Seed: c.addr.seed, Buckets: uint64(len(c.words)), Count: c.count}
	if c.changes == nil {
		return d
	}
	for _, o := range c.changes.orig {
		c.changes.seen[o.Index>>6] = 0
		if w := c.words[o.Index]; w != o.Word {
			d.Images = append(d.Images, BucketImage{Index: o.Index, Word: w})
		}
	}
	c.changes.orig = c.changes.orig[:0]
	slices.SortFunc(d.Images, func(a, b BucketImage) int { return cmp.Compare(a.Index, b.Index) })
	return d
}

// imageLen is the encoded size of one bucket image: index u32, word u64.
const imageLen = 12

// MarshalBinary encodes d: a cuckoo frame with the delta flag whose body is
// the image count (u32) followed by the images.
func (d Delta) MarshalBinary() ([]byte, error) {
	if d.Buckets < 2 || d.Buckets > maxBuckets || d.Buckets&(d.Buckets-1) != 0 || d.Count < 0 {
		return nil, fmt.Errorf("%w: delta for %d buckets, count %d", ErrGeometry, d.Buckets, d.Count)
	}
	if len(d.Images) > (1<<32-1-4)/imageLen {
		return nil, fmt.Errorf("%w: %d images exceed one frame", ErrUnsupported, len(d.Images))
	}
	h := header{kind: KindCuckoo, flags: flagDelta, seed: d.Seed, size: d.Buckets,
		p0: fingerprintBits, p1: slotsPerBucket, count: uint64(d.Count), bodyLen: uint32(4 + imageLen*len(d.Images))}
	return encodeFrame(h, func(body []byte) {
		binary.LittleEndian.PutUint32(body, uint32(len(d.Images)))
		for k, im := range d.Images {
			binary.LittleEndian.PutUint32(body[4+imageLen*k:], im.Index)
			binary.LittleEndian.PutUint64(body[8+imageLen*k:], im.Word)
		}
	}), nil
}

// DecodeDelta parses a delta produced by Delta.MarshalBinary, checking that
// indices are in range and strictly increasing.
func DecodeDelta(data []byte) (Delta, error) {
	h, body, err := decodeFrame(data)
	if err != nil {
		return Delta{}, err
	}
	if h.kind != KindCuckoo || h.flags != flagDelta {
		return Delta{}, fmt.Errorf("%w: kind %v flags %#x, want a cuckoo delta", ErrCorrupt, h.kind, h.flags)
	}
	if err := checkCuckooGeometry(h); err != nil {
		return Delta{}, err
	}
	if len(body) < 4 || uint64(len(body)-4) != uint64(binary.LittleEndian.Uint32(body))*imageLen {
		return Delta{}, fmt.Errorf("%w: delta body of %d bytes does not match its image count", ErrCorrupt, len(body))
	}
	if h.count > h.size*slotsPerBucket {
		return Delta{}, fmt.Errorf("%w: count %d exceeds %d slots", ErrCorrupt, h.count, h.size*slotsPerBucket)
	}
	return decodeImages(h, body[4:])
}

// decodeImages reads the images of a delta body.
func decodeImages(h header, raw []byte) (Delta, error) {
	d := Delta{Seed: h.seed, Buckets: h.size, Count: int(h.count), Images: make([]BucketImage, len(raw)/imageLen)}
	for k := range d.Images {
		im := BucketImage{Index: binary.LittleEndian.Uint32(raw[imageLen*k:]), Word: binary.LittleEndian.Uint64(raw[imageLen*k+4:])}
		if uint64(im.Index) >= h.size || (k > 0 && im.Index <= d.Images[k-1].Index) {
			return Delta{}, fmt.Errorf("%w: image %d has bucket %d out of order or range", ErrCorrupt, k, im.Index)
		}
		d.Images[k] = im
	}
	return d, nil
}
