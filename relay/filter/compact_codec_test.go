package filter

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"
)

// TestCompactFill95 fills compact tables of several sizes, up to the
// benchmark's 2^18 buckets, to 95% of their slots: every insert must
// succeed with the default kick bound.
func TestCompactFill95(t *testing.T) {
	tests := []struct {
		name    string
		buckets int
	}{
		{name: "2^10", buckets: 1 << 10},
		{name: "2^14", buckets: 1 << 14},
		{name: "2^18", buckets: 1 << 18},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCuckooOf(t, KindCuckooCompact, tt.buckets, 95)
			keys := fillTo(t, c, newRand(uint64(tt.buckets)), 0.95)
			if c.LoadFactor() < 0.95-1e-3 || c.Len() != len(keys) {
				t.Fatalf("load %.4f with %d entries", c.LoadFactor(), c.Len())
			}
		})
	}
}

// TestCompactFalsePositiveRate fills 2^14 compact buckets to 95% of their
// slots and probes 2·10^6 absent keys with a fixed seed. The formula gives
// 1-(1-1/8191)^(8·0.95) = 9.28e-4; the acceptance bound is 1e-3, 7.2%
// above it, which is 4.4 standard deviations of a 2·10^6-probe estimate.
func TestCompactFalsePositiveRate(t *testing.T) {
	rng := newRand(95)
	c := mustCuckooOf(t, KindCuckooCompact, 1<<14, 95)
	keys := fillTo(t, c, rng, 0.95)
	got, want := measureFP(c, rng, 2_000_000, setOf(keys)), c.FalsePositiveRate()
	bits := float64(8*c.SizeBytes()) / float64(c.Len())
	t.Logf("compact at load %.4f: measured FP %.4g, formula %.4g, %.3f bits/entry", c.LoadFactor(), got, want, bits)
	if got >= 1e-3 || math.Abs(got-want) > 0.1*want {
		t.Fatalf("measured FP %.4g, formula %.4g, bound 1e-3", got, want)
	}
	if bits > 12.64 {
		t.Fatalf("%.3f bits per entry, want 48/(4·0.95) = 12.63", bits)
	}
}

// encodedCompact returns a small filled compact filter and its encoding.
func encodedCompact(t *testing.T) (*Cuckoo, []byte) {
	t.Helper()
	c := mustCuckooOf(t, KindCuckooCompact, 64, 11)
	fillTo(t, c, newRand(11), 0.8)
	b, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return c, b
}

func TestCompactRoundTrip(t *testing.T) {
	c, b := encodedCompact(t)
	if want := headerLen + 64*compactBucketBytes + trailerLen; len(b) != want || b[6] != byte(KindCuckooCompact) || b[24] != compactFingerprintBits {
		t.Fatalf("encoding of %d bytes, kind %d, %d-bit fingerprints; want %d bytes", len(b), b[6], b[24], want)
	}
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
			if got.Kind() != KindCuckooCompact || !slices.Equal(storage(got), storage(c)) || got.Len() != c.Len() {
				t.Fatal("decoded filter differs")
			}
			again, _ := got.MarshalBinary()
			if !slices.Equal(again, b) {
				t.Fatal("re-encoding differs")
			}
		})
	}
}

func TestCompactDecodeRejects(t *testing.T) {
	_, good := encodedCompact(t)
	edit := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{name: "16-bit fingerprints", data: edit(func(b []byte) []byte { b[24] = 16; return reseal(b) }), want: ErrUnsupported},
		{name: "kind cuckoo with 6-byte buckets", data: edit(func(b []byte) []byte { b[6] = byte(KindCuckoo); b[24] = 16; return reseal(b) }), want: ErrCorrupt},
		{name: "rank out of range", data: edit(func(b []byte) []byte {
			binary.LittleEndian.PutUint16(b[headerLen:], sortedNibbleSets)
			return reseal(b)
		}), want: ErrCorrupt},
		{name: "non-canonical bucket", data: edit(func(b []byte) []byte {
			copy(b[headerLen:], []byte{0, 0x10, 0, 0, 0, 0}) // remainders 1,0,0,0 under nibbles 0,0,0,0
			return reseal(b)
		}), want: ErrCorrupt},
		{name: "entry count off by one", data: edit(func(b []byte) []byte { b[28]++; return reseal(b) }), want: ErrCorrupt},
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

// TestCompactDeltaRoundTrip ships inserts and deletes both ways, Diff and
// the change log, through the wire format to a replica, which must end
// byte-identical to the producer.
func TestCompactDeltaRoundTrip(t *testing.T) {
	c, b := encodedCompact(t)
	replica, _ := DecodeCuckoo(b)
	base, _ := DecodeCuckoo(b)
	c.TrackChanges()
	keys := randomHashes(newRand(12), 20)
	for _, h := range keys {
		if err := c.Insert(h); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range keys[:5] {
		if err := c.Delete(h); err != nil {
			t.Fatal(err)
		}
	}
	diff, err := base.Diff(c)
	if err != nil {
		t.Fatal(err)
	}
	taken := c.TakeChanges()
	if !slices.Equal(diff.Images, taken.Images) || diff.Count != taken.Count || taken.Kind != KindCuckooCompact {
		t.Fatalf("Diff has %d images, TakeChanges %d (kind %v)", len(diff.Images), len(taken.Images), taken.Kind)
	}
	wire, err := taken.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if want := headerLen + 4 + 10*len(taken.Images) + trailerLen; len(wire) != want {
		t.Fatalf("delta of %d bytes, want %d (10 bytes per image)", len(wire), want)
	}
	d, err := DecodeDelta(wire)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // absolute images: applying twice is a no-op
		if err := replica.Apply(d); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(storage(replica), storage(c)) || replica.Len() != c.Len() {
		t.Fatal("replica differs from producer after the delta")
	}
}

func TestCompactApplyRejects(t *testing.T) {
	c, _ := encodedCompact(t)
	wide := mustCuckoo(t, 64, 11)
	geo := Delta{Kind: KindCuckooCompact, Seed: c.Seed(), Buckets: 64, Count: c.Len()}
	with := func(images ...BucketImage) Delta { d := geo; d.Images = images; return d }
	tests := []struct {
		name string
		d    Delta
		want error
	}{
		{name: "16-bit delta", d: Delta{Seed: c.Seed(), Buckets: 64, Count: c.Len()}, want: ErrGeometry},
		{name: "rank out of range", d: with(BucketImage{Index: 3, Word: sortedNibbleSets}), want: ErrCorrupt},
		{name: "wider than 48 bits", d: with(BucketImage{Index: 3, Word: c.image(3) | 1<<50}), want: ErrCorrupt},
		{name: "non-canonical", d: with(BucketImage{Index: 3, Word: 1 << rankBits}), want: ErrCorrupt},
		{name: "wrong base", d: Delta{Kind: KindCuckooCompact, Seed: c.Seed(), Buckets: 64, Count: c.Len() + 1}, want: ErrBase},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := storage(c)
			if err := c.Apply(tt.d); !errors.Is(err, tt.want) {
				t.Fatalf("Apply = %v, want %v", err, tt.want)
			}
			if !slices.Equal(before, storage(c)) {
				t.Fatal("rejected delta changed the filter")
			}
			if _, err := tt.d.MarshalBinary(); tt.want == ErrCorrupt && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("MarshalBinary of a non-canonical delta = %v", err)
			}
		})
	}
	if _, err := c.Diff(wide); !errors.Is(err, ErrGeometry) {
		t.Fatalf("Diff across kinds = %v, want ErrGeometry", err)
	}
}

func TestKindHasDeltas(t *testing.T) {
	tests := []struct {
		name string
		kind Kind
		want bool
	}{
		{name: "cuckoo", kind: KindCuckoo, want: true},
		{name: "cuckoo-compact", kind: KindCuckooCompact, want: true},
		{name: "bloom", kind: KindBloom, want: true},
		{name: "unknown", kind: 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.kind.HasDeltas() != tt.want || (tt.want && tt.kind.String() != tt.name) {
				t.Fatalf("%v.HasDeltas() = %v", tt.kind, tt.kind.HasDeltas())
			}
			if _, err := newSummary(Config{Kind: tt.kind, Capacity: 100}, nil); tt.want && err != nil {
				t.Fatalf("newSummary(%v) = %v", tt.kind, err)
			}
		})
	}
}
