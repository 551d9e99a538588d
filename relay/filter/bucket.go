package filter

import (
	"math/bits"

	"github.com/kvrouter/kvrouter/routing"
)

// Geometry of the logical cuckoo bucket: four fingerprints in one uint64,
// lane s in bits [16s, 16s+16). A zero lane is an empty slot, which is why a
// fingerprint is never zero. KindCuckoo stores this word as is; the compact
// kind stores 13-bit fingerprints in 16-bit lanes of the same logical word
// and packs it to 48 bits (semisort.go), so every SWAR helper here serves
// both kinds.
const (
	slotsPerBucket = 4
	laneBits       = 16
	// fingerprintBits is the fingerprint width of KindCuckoo, which fills
	// its lanes.
	fingerprintBits = 16
	// lanesLo has the low bit of every lane set; multiplying a fingerprint
	// by it broadcasts the fingerprint to all four lanes.
	lanesLo = 0x0001_0001_0001_0001
	// lanesHi has the high bit of every lane set.
	lanesHi = 0x8000_8000_8000_8000
	// golden is 2^64 divided by the golden ratio, the multiplier of the
	// alternate-bucket hash (Fibonacci hashing keeps its high bits good).
	golden = 0x9E37_79B9_7F4A_7C15
)

// zeroLanes returns a mask whose lowest set bit is the high bit of the
// lowest zero lane of w, or 0 when no lane is zero. Bits above the lowest
// zero lane may be spurious, so only the lowest set bit is meaningful.
func zeroLanes(w uint64) uint64 {
	return (w - lanesLo) &^ w & lanesHi
}

// matchLanes is zeroLanes of w with fp subtracted from every lane: its
// lowest set bit marks the lowest lane that holds fp.
func matchLanes(w uint64, fp uint16) uint64 {
	return zeroLanes(w ^ uint64(fp)*lanesLo)
}

// laneShift turns a zeroLanes/matchLanes mask into the bit offset of the
// lane its lowest set bit belongs to.
func laneShift(mask uint64) uint {
	return uint(bits.TrailingZeros64(mask)) &^ 15
}

// occupied counts the non-empty lanes of w.
func occupied(w uint64) int {
	n := 0
	for s := uint(0); s < 64; s += laneBits {
		if uint16(w>>s) != 0 {
			n++
		}
	}
	return n
}

// mix64 is the MurmurHash3 64-bit finalizer. Block hashes are already XXH3
// outputs, but mixing them with the seed makes filters with different seeds
// place the same block independently, so a pathological collision set can be
// escaped by reseeding on rebuild.
func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51_afd7_ed55_8ccd
	x ^= x >> 33
	x *= 0xc4ce_b9fe_1a85_ec53
	x ^= x >> 33
	return x
}

// addressing holds what turns a block hash into a fingerprint and its two
// candidate buckets.
type addressing struct {
	seed    uint64
	mask    uint64 // bucket count - 1
	shift   uint   // 64 - log2(bucket count)
	fpShift uint   // 64 - fingerprint bits
	fpSalt  uint64 // keys the alternate-bucket hash by the seed
}

// newAddressing returns the addressing of a table of buckets buckets, a
// power of two in [2, 2^32], with fpBits-bit fingerprints (at most 16).
func newAddressing(seed, buckets uint64, fpBits uint) addressing {
	return addressing{
		seed:    seed,
		mask:    buckets - 1,
		shift:   uint(64 - bits.TrailingZeros64(buckets)),
		fpShift: 64 - fpBits,
		fpSalt:  mix64(seed ^ golden),
	}
}

// locate returns the fingerprint of h (top fingerprint-width mixed bits,
// never 0) and its primary bucket (low mixed bits, disjoint from the
// fingerprint's for any table up to 2^32 buckets).
func (a addressing) locate(h routing.SeqHash) (uint16, uint64) {
	m := mix64(uint64(h) ^ a.seed)
	fp := uint16(m >> a.fpShift)
	if fp == 0 {
		fp = 1
	}
	return fp, m & a.mask
}

// alt returns the other candidate bucket of fp given one of them. The offset
// depends on fp alone and is odd, so alt is an involution that never maps a
// bucket to itself: this is partial-key cuckoo hashing, which lets an
// evicted fingerprint move without knowing its block hash.
func (a addressing) alt(i uint64, fp uint16) uint64 {
	return i ^ (((uint64(fp)^a.fpSalt)*golden)>>a.shift | 1)
}
