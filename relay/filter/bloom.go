package filter

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/kvrouter/kvrouter/routing"
)

// maxBloomHashes bounds k: the optimum for any rate above 1e-19 is below 64,
// and a decoder must not accept a k that makes every lookup arbitrarily slow.
const maxBloomHashes = 64

// Bloom is a Bloom filter over block hashes on bits-and-blooms/bloom/v3.
// It cannot delete: a producer rebuilds it from the exact set on rotation
// (RefSet.Rebuild). Like a Cuckoo it ships changes as deltas
// (bloom_delta.go), whose images are the words of its bit array that adds
// changed. It is not safe for concurrent use; read-only methods may run
// concurrently while nothing adds.
type Bloom struct {
	f       *bloom.BloomFilter
	n       int
	changes *changeLog // nil until TrackChanges
}

var (
	_ Summary        = (*Bloom)(nil)
	_ mutableSummary = (*Bloom)(nil)
)

// NewBloom returns an empty Bloom filter with the optimal bit count m and
// hash count k for cfg.Capacity entries at cfg.BloomFPRate (after
// EnsureDefaults; cfg.Kind is ignored).
func NewBloom(cfg Config) (*Bloom, error) {
	cfg.Kind = KindBloom
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, k := bloom.EstimateParameters(uint(cfg.Capacity), cfg.BloomFPRate)
	return &Bloom{f: bloom.New(m, k)}, nil
}

// newBloomSummary is the Config-driven constructor of newSummary.
func newBloomSummary(cfg Config) (mutableSummary, error) {
	b, err := NewBloom(cfg)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// key is the byte form of a block hash that the library hashes.
func key(h routing.SeqHash) [8]byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(h))
	return b
}

// Kind returns KindBloom.
func (b *Bloom) Kind() Kind { return KindBloom }

// Add sets h's k bits. Adding a block twice counts it twice in Len.
func (b *Bloom) Add(h routing.SeqHash) {
	k := key(h)
	if b.changes != nil {
		b.noteWords(k[:])
	}
	b.f.Add(k[:])
	b.n++
}

// Contains reports whether h is probably present; false is certain.
func (b *Bloom) Contains(h routing.SeqHash) bool {
	k := key(h)
	return b.f.Test(k[:])
}

// ContainsPrefix returns the length of the longest prefix of hs all of whose
// blocks are probably present.
func (b *Bloom) ContainsPrefix(hs []routing.SeqHash) int {
	for n, h := range hs {
		if !b.Contains(h) {
			return n
		}
	}
	return len(hs)
}

// Len returns the number of Add calls since the filter was built.
func (b *Bloom) Len() int { return b.n }

// Bits returns m, the filter's bit count.
func (b *Bloom) Bits() int { return int(b.f.Cap()) }

// Hashes returns k, the number of bits set per entry.
func (b *Bloom) Hashes() int { return int(b.f.K()) }

// SizeBytes returns the size of the bit array.
func (b *Bloom) SizeBytes() int { return len(b.f.BitSet().Words()) * 8 }

// FalsePositiveRate returns (1 - e^(-k·n/m))^k for the current n.
func (b *Bloom) FalsePositiveRate() float64 {
	k, m := float64(b.f.K()), float64(b.f.Cap())
	return math.Pow(1-math.Exp(-k*float64(b.n)/m), k)
}

// insert and remove let a RefSet drive a Bloom through mutableSummary.
func (b *Bloom) insert(h routing.SeqHash) error { b.Add(h); return nil }
func (b *Bloom) remove(routing.SeqHash) error   { return errNoDelete }

// MarshalBinary encodes the filter: header (m in size, k in the slots
// byte, n in count), the bit array's words, checksum.
func (b *Bloom) MarshalBinary() ([]byte, error) {
	words := b.f.BitSet().Words()
	if len(words) > maxFrameBuckets {
		return nil, fmt.Errorf("%w: %d words exceed one frame", ErrUnsupported, len(words))
	}
	h := header{kind: KindBloom, size: uint64(b.f.Cap()), p1: uint8(b.f.K()), count: uint64(b.n), bodyLen: uint32(8 * len(words))}
	return encodeFrame(h, func(body []byte) {
		for i, w := range words {
			binary.LittleEndian.PutUint64(body[8*i:], w)
		}
	}), nil
}

// DecodeBloom parses a Bloom filter produced by MarshalBinary.
func DecodeBloom(data []byte) (*Bloom, error) {
	h, body, err := decodeFrame(data)
	if err != nil {
		return nil, err
	}
	if h.kind != KindBloom || h.flags != 0 {
		return nil, fmt.Errorf("%w: kind %v flags %#x, want a Bloom filter", ErrCorrupt, h.kind, h.flags)
	}
	return decodeBloom(h, body)
}

// decodeBloomSummary is the Decode hook for the Bloom kind.
// A nil *Bloom must not become a non-nil Summary.
func decodeBloomSummary(h header, body []byte) (Summary, error) {
	b, err := decodeBloom(h, body)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// checkBloomGeometry validates the Bloom fields of a header: no seed or
// fingerprint width, 1..maxBloomHashes hashes, 1..2^34 bits, a count that
// fits an int32.
func checkBloomGeometry(h header) error {
	if h.seed != 0 || h.p0 != 0 || h.p1 == 0 || h.p1 > maxBloomHashes {
		return fmt.Errorf("%w: bloom seed %#x, p0 %d, k %d", ErrCorrupt, h.seed, h.p0, h.p1)
	}
	if h.size == 0 || h.size > 64*maxFrameBuckets {
		return fmt.Errorf("%w: bloom of %d bits", ErrCorrupt, h.size)
	}
	if h.count > math.MaxInt32 {
		return fmt.Errorf("%w: entry count %d", ErrCorrupt, h.count)
	}
	return nil
}

// decodeBloom checks m, k and the body against each other: the body holds
// exactly ceil(m/64) words and no bit at or above m is set.
func decodeBloom(h header, body []byte) (*Bloom, error) {
	if err := checkBloomGeometry(h); err != nil {
		return nil, err
	}
	if h.size > uint64(len(body))*8 || (h.size+63)/64 != uint64(len(body))/8 || len(body)%8 != 0 {
		return nil, fmt.Errorf("%w: %d bits in a body of %d bytes", ErrCorrupt, h.size, len(body))
	}
	words := make([]uint64, len(body)/8)
	for i := range words {
		words[i] = binary.LittleEndian.Uint64(body[8*i:])
	}
	if tail := h.size % 64; tail != 0 && words[len(words)-1]>>tail != 0 {
		return nil, fmt.Errorf("%w: bits set beyond m=%d", ErrCorrupt, h.size)
	}
	return &Bloom{f: bloom.FromWithM(words, uint(h.size), uint(h.p1)), n: int(h.count)}, nil
}
