package filter

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/bits-and-blooms/bloom/v3"
)

// fuzzSeeds returns valid encodings of a full filter and of a delta of
// each cuckoo kind, the corpus the decoders' fuzz targets mutate.
func fuzzSeeds(f *testing.F) [][]byte {
	seeds := [][]byte{{}}
	for _, kind := range cuckooKinds {
		full, delta := kindSeeds(f, kind)
		seeds = append(seeds, full, delta, full[:headerLen])
	}
	return append(seeds, extraFuzzSeeds...)
}

// kindSeeds returns the encodings of a half-full 8-bucket filter of kind
// and of a delta of four inserts into it.
func kindSeeds(f *testing.F, kind Kind) (full, delta []byte) {
	c := mustCuckooOf(f, kind, 8, 1)
	fillTo(f, c, newRand(1), 0.5)
	full, err := c.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	c.TrackChanges()
	for _, h := range randomHashes(newRand(3), 4) {
		if err := c.Insert(h); err != nil {
			f.Fatal(err)
		}
	}
	delta, err = c.TakeChanges().MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	return full, delta
}

// extraFuzzSeeds holds encodings of kinds that only some builds have.
var extraFuzzSeeds [][]byte

// checkDecodeError fails unless err is nil or wraps one of the package's
// decoding sentinels.
func checkDecodeError(t *testing.T, err error) {
	if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
		t.Fatalf("decode error outside the ErrCorrupt/ErrUnsupported classes: %v", err)
	}
}

// sealedVariants returns data and, when it is long enough to have a
// trailer, a copy with the checksum recomputed, so that mutations reach the
// field checks behind the checksum.
func sealedVariants(data []byte) [][]byte {
	if len(data) < headerLen+trailerLen {
		return [][]byte{data}
	}
	return [][]byte{data, reseal(bytes.Clone(data))}
}

// FuzzDecode checks that Decode never panics, classifies every error, and
// that whatever it accepts re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range sealedVariants(data) {
			checkDecode(t, v)
		}
	})
}

// checkDecode is one FuzzDecode case.
func checkDecode(t *testing.T, data []byte) {
	s, err := Decode(data)
	checkDecodeError(t, err)
	if err != nil {
		return
	}
	again, err := s.MarshalBinary()
	if err != nil || !bytes.Equal(again, data) {
		t.Fatalf("accepted input does not re-encode to itself: %v", err)
	}
}

// FuzzDecodeDelta checks DecodeDelta the same way and that an accepted
// delta either applies to a filter of its geometry or is refused without
// changing it.
func FuzzDecodeDelta(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range sealedVariants(data) {
			checkDecodeDelta(t, v)
		}
	})
}

// checkDecodeDelta is one FuzzDecodeDelta case.
func checkDecodeDelta(t *testing.T, data []byte) {
	d, err := DecodeDelta(data)
	checkDecodeError(t, err)
	if err != nil {
		return
	}
	again, err := d.MarshalBinary()
	if err != nil || !bytes.Equal(again, data) {
		t.Fatalf("accepted delta does not re-encode to itself: %v", err)
	}
	if d.Kind == KindBloom {
		checkApplyBloomDelta(t, d)
		return
	}
	if d.Buckets > 1<<16 {
		return
	}
	c := newCuckoo(d.Kind, d.Seed, d.Buckets, DefaultMaxKicks, nil)
	err = c.Apply(d)
	switch {
	case err == nil && c.Len() != d.Count:
		t.Fatalf("applied delta left %d entries, declared %d", c.Len(), d.Count)
	case err != nil && (c.Len() != 0 || slices.ContainsFunc(storage(c), func(b byte) bool { return b != 0 })):
		t.Fatalf("refused delta changed the filter: %v", err)
	}
}

// checkApplyBloomDelta applies an accepted Bloom delta to an empty filter
// of its geometry: it is accepted whole (an empty filter's count is 0, and
// the decoder checked everything else).
func checkApplyBloomDelta(t *testing.T, d Delta) {
	if d.Bits > 1<<20 {
		return
	}
	b := &Bloom{f: bloom.New(uint(d.Bits), uint(d.Hashes))}
	if err := b.Apply(d); err != nil || b.Len() != d.Count {
		t.Fatalf("decoded bloom delta refused (%v) or count %d, declared %d", err, b.Len(), d.Count)
	}
}
