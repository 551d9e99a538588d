package filter

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/zeebo/xxh3"
)

// encodedCuckoo returns a small filled filter and its encoding.
func encodedCuckoo(t *testing.T) (*Cuckoo, []byte) {
	t.Helper()
	c := mustCuckoo(t, 64, 11)
	fillTo(t, c, newRand(11), 0.7)
	b, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return c, b
}

// reseal recomputes the trailer checksum after a test edits a frame, so
// the decoder's field checks are reached.
func reseal(b []byte) []byte {
	end := len(b) - trailerLen
	binary.LittleEndian.PutUint32(b[end:], uint32(xxh3.Hash(b[:end])))
	return b
}

func TestCuckooRoundTrip(t *testing.T) {
	c, b := encodedCuckoo(t)
	for _, decode := range []struct {
		name string
		fn   func([]byte) (Summary, error)
	}{
		{name: "Decode", fn: Decode},
		{name: "DecodeCuckoo", fn: func(b []byte) (Summary, error) { return DecodeCuckoo(b) }},
	} {
		t.Run(decode.name, func(t *testing.T) {
			s, err := decode.fn(b)
			if err != nil {
				t.Fatal(err)
			}
			got := s.(*Cuckoo)
			if !slices.Equal(got.words, c.words) || got.Len() != c.Len() || got.Seed() != c.Seed() {
				t.Fatal("decoded filter differs")
			}
			again, _ := got.MarshalBinary()
			if !slices.Equal(again, b) {
				t.Fatal("re-encoding differs")
			}
		})
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	_, good := encodedCuckoo(t)
	edit := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{name: "empty", data: nil, want: ErrCorrupt},
		{name: "truncated header", data: good[:20], want: ErrCorrupt},
		{name: "truncated body", data: good[:len(good)-9], want: ErrCorrupt},
		{name: "bad magic", data: edit(func(b []byte) []byte { b[0] = 'X'; return reseal(b) }), want: ErrCorrupt},
		{name: "flipped body bit", data: edit(func(b []byte) []byte { b[100] ^= 1; return b }), want: ErrCorrupt},
		{name: "flipped checksum", data: edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), want: ErrCorrupt},
		{name: "future version", data: edit(func(b []byte) []byte { b[4] = 2; return reseal(b) }), want: ErrUnsupported},
		{name: "unknown kind", data: edit(func(b []byte) []byte { b[6] = 9; return reseal(b) }), want: ErrUnsupported},
		{name: "delta flag", data: edit(func(b []byte) []byte { b[7] = flagDelta; return reseal(b) }), want: ErrCorrupt},
		{name: "reserved set", data: edit(func(b []byte) []byte { b[26] = 1; return reseal(b) }), want: ErrCorrupt},
		{name: "12-bit fingerprints", data: edit(func(b []byte) []byte { b[24] = 12; return reseal(b) }), want: ErrUnsupported},
		{name: "bucket count not a power of two", data: edit(func(b []byte) []byte { b[16] = 63; return reseal(b) }), want: ErrCorrupt},
		{name: "bucket count vs body", data: edit(func(b []byte) []byte { b[16] = 32; return reseal(b) }), want: ErrCorrupt},
		{name: "entry count off by one", data: edit(func(b []byte) []byte { b[28]++; return reseal(b) }), want: ErrCorrupt},
		{name: "body length off", data: edit(func(b []byte) []byte { b[36]--; return reseal(b) }), want: ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Decode(tt.data)
			if !errors.Is(err, tt.want) || s != nil {
				t.Fatalf("Decode = %v, %v; want %v", s, err, tt.want)
			}
		})
	}
}

// TestDeltaRoundTrip mutates a copy of a filter and ships the change both
// ways: Diff of the two versions and the change log; each delta, encoded
// and decoded, turns the old version into the new one.
func TestDeltaRoundTrip(t *testing.T) {
	c, b := encodedCuckoo(t)
	replica, _ := DecodeCuckoo(b)
	c.TrackChanges()
	rng := newRand(12)
	for _, h := range randomHashes(rng, 20) {
		if err := c.Insert(h); err != nil {
			t.Fatal(err)
		}
	}
	base, _ := DecodeCuckoo(b)
	diff, err := base.Diff(c)
	if err != nil {
		t.Fatal(err)
	}
	taken := c.TakeChanges()
	if !slices.Equal(diff.Images, taken.Images) || diff.Count != taken.Count {
		t.Fatalf("Diff has %d images, TakeChanges %d", len(diff.Images), len(taken.Images))
	}
	wire, err := taken.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	d, err := DecodeDelta(wire)
	if err != nil {
		t.Fatal(err)
	}
	if err := replica.Apply(d); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(replica.words, c.words) || replica.Len() != c.Len() {
		t.Fatal("replica differs from producer after the delta")
	}
	if err := replica.Apply(d); err != nil {
		t.Fatalf("absolute images are idempotent, second Apply: %v", err)
	}
	if d := c.TakeChanges(); len(d.Images) != 0 {
		t.Fatalf("second TakeChanges returned %d images", len(d.Images))
	}
}

func TestApplyRejects(t *testing.T) {
	c, b := encodedCuckoo(t)
	other := mustCuckoo(t, 128, 11)
	good := Delta{Seed: c.Seed(), Buckets: 64, Count: c.Len(), Images: []BucketImage{{Index: 3, Word: c.words[3]}, {Index: 5, Word: c.words[5]}}}
	tests := []struct {
		name string
		d    Delta
		want error
	}{
		{name: "other seed", d: Delta{Seed: 12, Buckets: 64, Count: c.Len()}, want: ErrGeometry},
		{name: "other size", d: Delta{Seed: c.Seed(), Buckets: 128, Count: c.Len()}, want: ErrGeometry},
		{name: "index out of range", d: Delta{Seed: c.Seed(), Buckets: 64, Count: c.Len(), Images: []BucketImage{{Index: 64}}}, want: ErrCorrupt},
		{name: "unsorted", d: Delta{Seed: c.Seed(), Buckets: 64, Count: c.Len(), Images: []BucketImage{{Index: 5, Word: c.words[5]}, {Index: 3, Word: c.words[3]}}}, want: ErrCorrupt},
		{name: "wrong base", d: Delta{Seed: c.Seed(), Buckets: 64, Count: c.Len() + 1, Images: good.Images}, want: ErrBase},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(c.words)
			if err := c.Apply(tt.d); !errors.Is(err, tt.want) {
				t.Fatalf("Apply = %v, want %v", err, tt.want)
			}
			if !slices.Equal(before, c.words) {
				t.Fatal("rejected delta changed the filter")
			}
		})
	}
	if _, err := c.Diff(other); !errors.Is(err, ErrGeometry) {
		t.Fatalf("Diff across sizes = %v, want ErrGeometry", err)
	}
	if _, err := DecodeDelta(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("DecodeDelta of a full filter = %v, want ErrCorrupt", err)
	}
}
