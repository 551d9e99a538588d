package filter

import (
	"encoding/binary"
	"fmt"

	"github.com/zeebo/xxh3"
)

// Encoding of a summary or delta, little-endian:
//
//	off len field
//	0   4   magic "KVRF"
//	4   2   format version (1)
//	6   1   kind (1 cuckoo, 2 bloom, 3 cuckoo-compact)
//	7   1   flags (bit 0: delta; others must be 0)
//	8   8   seed (cuckoo addressing seed; bloom 0)
//	16  8   size (cuckoo bucket count; bloom bit count m)
//	24  1   cuckoo fingerprint bits (16, compact 13); bloom 0
//	25  1   cuckoo slots per bucket (4); bloom hash count k
//	26  2   reserved, 0
//	28  8   entry count (for a delta: the count after applying it)
//	36  4   body length n
//	40  n   body
//	40+n 4  checksum: low 32 bits of XXH3-64 of bytes [0, 40+n)
//
// A full cuckoo body is the bucket images in bucket order: 8-byte words
// (cuckoo) or 6-byte semi-sorted codes (cuckoo-compact, semisort.go), each
// little-endian. The checksum is always the last four bytes, whatever the
// version, so a damaged version field is reported as corruption, not as a
// new version.
const (
	magic         = "KVRF"
	formatVersion = 1
	headerLen     = 40
	trailerLen    = 4
	flagDelta     = 1
	// maxFrameBuckets is the largest power-of-two bucket count whose words
	// fit a body length of 32 bits.
	maxFrameBuckets = 1 << 28
)

// header is the decoded fixed part of an encoding.
type header struct {
	kind    Kind
	flags   uint8
	seed    uint64
	size    uint64
	p0, p1  uint8
	count   uint64
	bodyLen uint32
}

// encodeFrame returns the header, room for a body of bodyLen bytes and the
// trailer; fill writes the body and the checksum is computed after it.
func encodeFrame(h header, fill func(body []byte)) []byte {
	out := make([]byte, headerLen+int(h.bodyLen)+trailerLen)
	copy(out, magic)
	binary.LittleEndian.PutUint16(out[4:], formatVersion)
	out[6], out[7] = byte(h.kind), h.flags
	binary.LittleEndian.PutUint64(out[8:], h.seed)
	binary.LittleEndian.PutUint64(out[16:], h.size)
	out[24], out[25] = h.p0, h.p1
	binary.LittleEndian.PutUint64(out[28:], h.count)
	binary.LittleEndian.PutUint32(out[36:], h.bodyLen)
	end := headerLen + int(h.bodyLen)
	fill(out[headerLen:end])
	binary.LittleEndian.PutUint32(out[end:], uint32(xxh3.Hash(out[:end])))
	return out
}

// decodeFrame checks everything kind-independent and returns the header and
// the body. It never allocates in proportion to a length read from data.
func decodeFrame(data []byte) (header, []byte, error) {
	var h header
	if len(data) < headerLen+trailerLen {
		return h, nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte frame", ErrCorrupt, len(data), headerLen+trailerLen)
	}
	if string(data[:4]) != magic {
		return h, nil, fmt.Errorf("%w: bad magic %q", ErrCorrupt, data[:4])
	}
	end := len(data) - trailerLen
	if got, want := binary.LittleEndian.Uint32(data[end:]), uint32(xxh3.Hash(data[:end])); got != want {
		return h, nil, fmt.Errorf("%w: checksum %#08x, computed %#08x", ErrCorrupt, got, want)
	}
	if v := binary.LittleEndian.Uint16(data[4:]); v != formatVersion {
		return h, nil, fmt.Errorf("%w: format version %d (this build reads %d)", ErrUnsupported, v, formatVersion)
	}
	h = header{
		kind: Kind(data[6]), flags: data[7],
		seed: binary.LittleEndian.Uint64(data[8:]), size: binary.LittleEndian.Uint64(data[16:]),
		p0: data[24], p1: data[25],
		count: binary.LittleEndian.Uint64(data[28:]), bodyLen: binary.LittleEndian.Uint32(data[36:]),
	}
	if r := binary.LittleEndian.Uint16(data[26:]); r != 0 {
		return h, nil, fmt.Errorf("%w: reserved field %#x", ErrCorrupt, r)
	}
	if int(h.bodyLen) != end-headerLen {
		return h, nil, fmt.Errorf("%w: body length %d, frame holds %d", ErrCorrupt, h.bodyLen, end-headerLen)
	}
	return h, data[headerLen:end], nil
}

// checkCuckooGeometry validates the cuckoo fields of a header.
func checkCuckooGeometry(h header) error {
	if !h.kind.IsCuckoo() {
		return fmt.Errorf("%w: kind %v is not a cuckoo filter", ErrCorrupt, h.kind)
	}
	if uint(h.p0) != h.kind.fingerprintWidth() || h.p1 != slotsPerBucket {
		return fmt.Errorf("%w: %v with %d-bit fingerprints, %d slots per bucket (this build reads %d and %d)",
			ErrUnsupported, h.kind, h.p0, h.p1, h.kind.fingerprintWidth(), slotsPerBucket)
	}
	if h.size < 2 || h.size > maxBuckets || h.size&(h.size-1) != 0 {
		return fmt.Errorf("%w: bucket count %d is not a power of two in [2, 2^32]", ErrCorrupt, h.size)
	}
	return nil
}

// header describes c for encoding.
func (c *Cuckoo) header(flags uint8, bodyLen int) header {
	return header{
		kind: c.kind, flags: flags, seed: c.addr.seed, size: uint64(c.Buckets()),
		p0: uint8(c.kind.fingerprintWidth()), p1: slotsPerBucket, count: uint64(c.count), bodyLen: uint32(bodyLen),
	}
}

// MarshalBinary encodes the whole filter: header, bucket images, checksum.
// A filter over 2^28 buckets (2 GiB) does not fit one frame, whose body
// length is 32 bits, and is refused.
func (c *Cuckoo) MarshalBinary() ([]byte, error) {
	n := c.Buckets()
	if n > maxFrameBuckets {
		return nil, fmt.Errorf("%w: %d buckets exceed one frame", ErrUnsupported, n)
	}
	size := c.kind.bucketBytes()
	return encodeFrame(c.header(0, n*size), func(body []byte) {
		if c.packed != nil { // memory already holds the wire form
			copy(body, c.packed[:n*size])
			return
		}
		for i := range uint64(n) {
			putImage(c.kind, body[i*uint64(size):], c.image(i))
		}
	}), nil
}

// DecodeCuckoo parses a full cuckoo filter of either layout produced by
// MarshalBinary. The decoded filter inserts with DefaultMaxKicks and a
// generator seeded from its seed.
func DecodeCuckoo(data []byte) (*Cuckoo, error) {
	h, body, err := decodeFrame(data)
	if err != nil {
		return nil, err
	}
	if !h.kind.IsCuckoo() || h.flags != 0 {
		return nil, fmt.Errorf("%w: kind %v flags %#x, want a full cuckoo filter", ErrCorrupt, h.kind, h.flags)
	}
	return decodeCuckoo(h, body)
}

// decodeCuckoo builds a filter from a checked frame, verifying that the body
// holds exactly the bucket count's images, that every compact image is
// canonical, and that the entry count matches the occupied slots.
func decodeCuckoo(h header, body []byte) (*Cuckoo, error) {
	if err := checkCuckooGeometry(h); err != nil {
		return nil, err
	}
	if uint64(len(body)) != h.size*uint64(h.kind.bucketBytes()) {
		return nil, fmt.Errorf("%w: body of %d bytes for %d buckets", ErrCorrupt, len(body), h.size)
	}
	c := newCuckoo(h.kind, h.seed, h.size, DefaultMaxKicks, nil)
	size := h.kind.bucketBytes()
	for i := range h.size {
		im := readImage(h.kind, body[i*uint64(size):])
		if !validImage(h.kind, im) {
			return nil, fmt.Errorf("%w: bucket %d image %#x is not canonical", ErrCorrupt, i, im)
		}
		c.store(i, im)
		c.count += occupiedImage(h.kind, im)
	}
	if uint64(c.count) != h.count {
		return nil, fmt.Errorf("%w: header counts %d entries, buckets hold %d", ErrCorrupt, h.count, c.count)
	}
	return c, nil
}
