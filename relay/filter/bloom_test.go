package filter

import (
	"errors"
	"slices"
	"testing"
)

func init() {
	b, err := NewBloom(Config{Capacity: 16, BloomFPRate: 0.1})
	if err != nil {
		panic(err)
	}
	b.TrackChanges()
	b.Add(1)
	seed, _ := b.MarshalBinary()
	delta, _ := b.TakeChanges().MarshalBinary()
	extraFuzzSeeds = append(extraFuzzSeeds, seed, delta)
}

func mustBloom(t *testing.T, capacity int, fp float64) *Bloom {
	t.Helper()
	b, err := NewBloom(Config{Capacity: capacity, BloomFPRate: fp})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBloomFalsePositiveRate fills a Bloom filter to its capacity and
// checks the measured rate against (1-e^(-kn/m))^k.
func TestBloomFalsePositiveRate(t *testing.T) {
	rng := newRand(96)
	b := mustBloom(t, 60_000, 1.16e-4)
	keys := randomHashes(rng, 60_000)
	for _, h := range keys {
		b.Add(h)
	}
	for _, h := range keys {
		if !b.Contains(h) {
			t.Fatalf("false negative for %#x", h)
		}
	}
	got, want := measureFP(b, rng, 1_000_000, setOf(keys)), b.FalsePositiveRate()
	t.Logf("bloom m=%d k=%d: measured FP %.3g, formula %.3g, %.2f bits/entry", b.Bits(), b.Hashes(), got, want, float64(8*b.SizeBytes())/float64(b.Len()))
	if got < 0.6*want || got > 1.4*want {
		t.Fatalf("measured FP %.3g, formula %.3g", got, want)
	}
}

func TestBloomRoundTrip(t *testing.T) {
	b := mustBloom(t, 1000, 1e-3)
	keys := randomHashes(newRand(4), 500)
	for _, h := range keys {
		b.Add(h)
	}
	data, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind() != KindBloom || s.Len() != b.Len() || s.ContainsPrefix(keys) != len(keys) {
		t.Fatalf("decoded %v len %d prefix %d", s.Kind(), s.Len(), s.ContainsPrefix(keys))
	}
	again, _ := s.MarshalBinary()
	if !slices.Equal(again, data) {
		t.Fatal("re-encoding differs")
	}
}

func TestDecodeBloomRejects(t *testing.T) {
	b := mustBloom(t, 100, 1e-2)
	b.Add(1)
	good, _ := b.MarshalBinary()
	edit := func(f func(b []byte) []byte) []byte { return reseal(f(slices.Clone(good))) }
	tests := []struct {
		name string
		data []byte
	}{
		{name: "k zero", data: edit(func(b []byte) []byte { b[25] = 0; return b })},
		{name: "k huge", data: edit(func(b []byte) []byte { b[25] = 200; return b })},
		{name: "m beyond body", data: edit(func(b []byte) []byte { b[17]++; return b })},
		{name: "m far below body", data: edit(func(b []byte) []byte { b[16], b[17] = 1, 0; return b })},
		{name: "bit beyond m", data: edit(func(b []byte) []byte { b[len(b)-trailerLen-1] |= 0x80; return b })},
		{name: "seed set", data: edit(func(b []byte) []byte { b[8] = 1; return b })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s, err := DecodeBloom(tt.data); !errors.Is(err, ErrCorrupt) || s != nil {
				t.Fatalf("DecodeBloom = %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestRefSetBloomRotation checks the Bloom producer path: removes leave
// stale entries (never false negatives), Rebuild drops them.
func TestRefSetBloomRotation(t *testing.T) {
	r := mustRefSet(t, Config{Kind: KindBloom, Capacity: 1000, BloomFPRate: 1e-4})
	keys := randomHashes(newRand(13), 1000)
	for _, h := range keys {
		if err := r.Add(h); err != nil {
			t.Fatal(err)
		}
	}
	gone, kept := keys[:500], keys[500:]
	for _, h := range gone {
		if err := r.Remove(h); err != nil {
			t.Fatal(err)
		}
	}
	if r.Stale() != len(gone) || r.Summary().ContainsPrefix(gone) != len(gone) {
		t.Fatalf("stale %d; removed blocks should stay set until rotation", r.Stale())
	}
	if err := r.Rebuild(0); err != nil {
		t.Fatal(err)
	}
	if r.Stale() != 0 || r.Generation() != 1 || r.Summary().Len() != len(kept) {
		t.Fatalf("after rotation stale %d generation %d len %d", r.Stale(), r.Generation(), r.Summary().Len())
	}
	if r.Summary().ContainsPrefix(kept) != len(kept) {
		t.Fatal("false negative after rotation")
	}
	still := 0
	for _, h := range gone {
		if r.Summary().Contains(h) {
			still++
		}
	}
	if still > 2 {
		t.Fatalf("%d of %d removed blocks still present after rotation", still, len(gone))
	}
}
