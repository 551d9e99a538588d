package filter

import (
	"fmt"
	"math"
)

// Kind names a summary implementation. Its numeric value is part of the
// encoding and must never change.
type Kind uint8

// The summary kinds.
const (
	// KindCuckoo is the packed-bucket cuckoo filter: deletes, 16-bit
	// fingerprints, a fixed false-positive ceiling of about 1.2e-4.
	KindCuckoo Kind = 1
	// KindBloom is the Bloom filter on bits-and-blooms/bloom/v3: no
	// deletes, rebuilt from the exact set on rotation.
	KindBloom Kind = 2
	// KindCuckooCompact is the cuckoo filter with semi-sorted buckets:
	// deletes and deltas like KindCuckoo, 13-bit fingerprints in 12 bits
	// per slot, about 12.6 bits per entry and a 9.3e-4 false-positive rate
	// at 95% load.
	KindCuckooCompact Kind = 3
)

// String returns the lowercase name of the kind.
func (k Kind) String() string {
	switch k {
	case KindCuckoo:
		return "cuckoo"
	case KindBloom:
		return "bloom"
	case KindCuckooCompact:
		return "cuckoo-compact"
	default:
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
}

// ParseKind returns the kind named name (as String writes it).
func ParseKind(name string) (Kind, error) {
	for _, k := range []Kind{KindCuckoo, KindBloom, KindCuckooCompact} {
		if k.String() == name {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown kind %q (cuckoo, cuckoo-compact or bloom)", ErrConfig, name)
}

// IsCuckoo reports whether summaries of kind k are cuckoo filters:
// KindCuckoo and KindCuckooCompact.
func (k Kind) IsCuckoo() bool {
	return k == KindCuckoo || k == KindCuckooCompact
}

// HasDeltas reports whether summaries of kind k ship changes as Delta
// (TrackChanges, TakeChanges, Apply): every kind. A cuckoo delta carries
// the images of changed buckets, inserts and deletes alike; a Bloom delta
// the images of the bit array's words that inserts changed, since a Bloom
// filter cannot delete.
func (k Kind) HasDeltas() bool {
	return k.IsCuckoo() || k == KindBloom
}

// fingerprintWidth returns the fingerprint bits of a cuckoo kind, 0 for
// other kinds.
func (k Kind) fingerprintWidth() uint {
	switch k {
	case KindCuckoo:
		return fingerprintBits
	case KindCuckooCompact:
		return compactFingerprintBits
	default:
		return 0
	}
}

// bucketBytes returns the stored size of one bucket of a cuckoo kind.
func (k Kind) bucketBytes() int {
	if k == KindCuckooCompact {
		return compactBucketBytes
	}
	return 8
}

// Defaults of Config. Each comment says why the value is what it is.
const (
	// DefaultMaxKicks bounds the eviction walk of one cuckoo insert. 500 is
	// the reference router's value: at 95% load an insert needs a few dozen
	// kicks on average, and the bound caps a failing insert at ~10 µs.
	DefaultMaxKicks = 500
	// MaxMaxKicks caps MaxKicks so that a failed insert stays cheap and its
	// undo log small.
	MaxMaxKicks = 4096
	// DefaultTargetLoad sizes the cuckoo table so that Capacity entries
	// fill at most 90% of the slots. 4-slot buckets with partial-key
	// cuckoo hashing start failing inserts near 95-98% load; 0.9 leaves
	// headroom so a producer at its declared capacity practically never
	// sees ErrFull. Power-of-two rounding often lowers the real load.
	DefaultTargetLoad = 0.9
	// MaxTargetLoad is the highest accepted TargetLoad: above it inserts
	// fail too often to be a sizing target.
	MaxTargetLoad = 0.98
	// DefaultBloomFPRate is the Bloom target false-positive rate: 1e-4
	// matches what the cuckoo filter gives at about 85% load, so the two
	// kinds are compared at the same precision.
	DefaultBloomFPRate = 1e-4
	// maxBuckets keeps every bucket index in 32 bits, which the delta
	// encoding relies on (2^32 buckets is 32 GiB of filter).
	maxBuckets = 1 << 32
	// maxCapacity bounds Capacity so that it fits an int everywhere.
	maxCapacity = 1<<31 - 1
)

// Config sizes a summary. The zero value is not valid: Capacity is
// required; EnsureDefaults fills every other field. A summary must fit one
// encoded frame (2^28 cuckoo buckets or 2^34 Bloom bits, 2 GiB), which
// Validate checks.
type Config struct {
	// Kind selects the implementation; zero means KindCuckoo. Capacity,
	// TargetLoad and MaxKicks size both cuckoo kinds alike: the bucket
	// count depends on entries and load only, not on fingerprint width.
	Kind Kind
	// Capacity is the expected number of distinct blocks.
	Capacity int
	// Seed keys the cuckoo addressing so that two filters with different
	// seeds place the same block independently. Zero is a valid seed.
	Seed uint64
	// MaxKicks bounds one cuckoo insert's eviction walk (1..MaxMaxKicks).
	MaxKicks int
	// TargetLoad is the cuckoo slot occupancy at Capacity entries
	// (0 < TargetLoad <= MaxTargetLoad).
	TargetLoad float64
	// BloomFPRate is the Bloom false-positive rate at Capacity entries
	// (0 < BloomFPRate < 1).
	BloomFPRate float64
}

// EnsureDefaults fills every zero field except Capacity and Seed with its
// default.
func (c *Config) EnsureDefaults() {
	if c.Kind == 0 {
		c.Kind = KindCuckoo
	}
	if c.MaxKicks == 0 {
		c.MaxKicks = DefaultMaxKicks
	}
	if c.TargetLoad == 0 {
		c.TargetLoad = DefaultTargetLoad
	}
	if c.BloomFPRate == 0 {
		c.BloomFPRate = DefaultBloomFPRate
	}
}

// Validate reports the first invalid field, wrapped in ErrConfig.
func (c Config) Validate() error {
	switch {
	case !c.Kind.HasDeltas():
		return fmt.Errorf("%w: unknown kind %d", ErrConfig, c.Kind)
	case c.Capacity <= 0 || c.Capacity > maxCapacity:
		return fmt.Errorf("%w: capacity %d outside 1..%d", ErrConfig, c.Capacity, maxCapacity)
	case c.MaxKicks < 1 || c.MaxKicks > MaxMaxKicks:
		return fmt.Errorf("%w: max kicks %d outside 1..%d", ErrConfig, c.MaxKicks, MaxMaxKicks)
	case !(c.TargetLoad > 0 && c.TargetLoad <= MaxTargetLoad):
		return fmt.Errorf("%w: target load %v outside (0, %v]", ErrConfig, c.TargetLoad, MaxTargetLoad)
	case !(c.BloomFPRate > 0 && c.BloomFPRate < 1):
		return fmt.Errorf("%w: bloom false-positive rate %v outside (0, 1)", ErrConfig, c.BloomFPRate)
	case c.Kind.IsCuckoo() && c.cuckooBucketsNeeded() > maxFrameBuckets:
		return fmt.Errorf("%w: %d entries at load %v need more than %d buckets", ErrConfig, c.Capacity, c.TargetLoad, maxFrameBuckets)
	case c.Kind == KindBloom && c.bloomBitsNeeded() > 64*maxFrameBuckets:
		return fmt.Errorf("%w: %d entries at rate %v need more than %d bits", ErrConfig, c.Capacity, c.BloomFPRate, uint64(64*maxFrameBuckets))
	}
	return nil
}

// cuckooBucketsNeeded is the unrounded bucket count for Capacity entries at
// TargetLoad.
func (c Config) cuckooBucketsNeeded() float64 {
	return math.Ceil(float64(c.Capacity) / (slotsPerBucket * c.TargetLoad))
}

// bloomBitsNeeded is the optimal Bloom bit count for Capacity entries at
// BloomFPRate: n·ln(1/ε)/ln²2.
func (c Config) bloomBitsNeeded() float64 {
	return -float64(c.Capacity) * math.Log(c.BloomFPRate) / (math.Ln2 * math.Ln2)
}

// cuckooBuckets is the power-of-two bucket count that holds Capacity
// entries at TargetLoad, at least 2 so that alternate buckets differ.
func (c Config) cuckooBuckets() uint64 {
	need := c.cuckooBucketsNeeded()
	b := uint64(2)
	for float64(b) < need && b < maxBuckets {
		b <<= 1
	}
	return b
}
