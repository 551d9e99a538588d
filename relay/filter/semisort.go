package filter

import "encoding/binary"

// Semi-sorted bucket codec of KindCuckooCompact (Fan et al., "Cuckoo
// Filter: Practically Better Than Bloom", §5.2). A bucket holds four 13-bit
// fingerprints, each split into a high nibble and 9 low bits. Kept in
// ascending order, the four nibbles form a sorted multiset of four values
// in 0..15, of which there are C(19, 4) = 3876, so 12 bits name them; the
// bucket is that rank plus the four 9-bit remainders in the same order:
//
//	bits  0..11  rank of the sorted nibble quadruple (0..3875)
//	bits 12..47  low 9 bits of lanes 0..3, lane s at bit 12+9s
//
// 48 bits instead of 52, so 12 bits per slot for 13-bit fingerprints. In
// memory, in the encoding and in deltas a bucket is these 6 bytes,
// little-endian.
//
// Canonical form: the fingerprints are sorted by their whole 13-bit value,
// not only by nibble, so a multiset of fingerprints has exactly one image.
// That makes re-encoding byte-exact and Diff a plain comparison, and it puts
// empty slots (fingerprint 0) first. Decoders reject any other image.
//
// Rank and unrank: the rank uses the combinatorial number system for
// multisets. A sorted quadruple n0 <= n1 <= n2 <= n3 becomes the strictly
// increasing set {n0, n1+1, n2+2, n3+3} of 0..18, whose rank is
// C(n0,1) + C(n1+1,2) + C(n2+2,3) + C(n3+3,4). Encoding is four lookups
// in a 4x16 table of those binomials (padded to 4x128, 1 KiB) and three
// adds; a full encode table indexed by the 16-bit nibble word would need
// 128 KiB and push the bucket data out of L1. Decoding is one lookup in
// nibbleUnrank, 4096 uint16 entries (8 KiB) so that masking the rank to 12
// bits needs no bounds check; ranks 3876..4095 are never stored.
const (
	compactFingerprintBits = 13
	nibbleShift            = compactFingerprintBits - 4 // low bits per fingerprint
	lowMask                = 1<<nibbleShift - 1
	rankBits               = 12
	rankMask               = 1<<rankBits - 1
	// sortedNibbleSets is C(16+4-1, 4), the number of sorted quadruples
	// of nibbles.
	sortedNibbleSets = 3876
	// compactBucketBytes is the stored size of one compact bucket.
	compactBucketBytes = 6
	// compactPadding follows the last bucket so that every bucket can be
	// read with one unaligned 8-byte load.
	compactPadding = 8 - compactBucketBytes
	imageMask      = 1<<(8*compactBucketBytes) - 1
)

var (
	// nibbleRank[k][n] is C(n+k, k+1), the rank contribution of nibble n
	// in sorted position k. It is indexed by the whole lane shifted down
	// (up to 127 for a 16-bit lane) so that the lookup needs neither mask
	// nor bounds check; entries past 15 are never used.
	nibbleRank = buildNibbleRank()
	// nibbleUnrank maps a rank to the nibble quadruple n0 | n1<<4 |
	// n2<<8 | n3<<12, in ascending order.
	nibbleUnrank = buildNibbleUnrank()
)

// binomial returns C(n, k) for the small arguments of the rank tables.
func binomial(n, k int) int {
	if k < 0 || k > n {
		return 0
	}
	r := 1
	for i := 1; i <= k; i++ {
		r = r * (n - k + i) / i
	}
	return r
}

// buildNibbleRank fills the rank table.
func buildNibbleRank() (t [slotsPerBucket][1 << (16 - nibbleShift)]uint16) {
	for k := range t {
		for n := range 16 {
			t[k][n] = uint16(binomial(n+k, k+1))
		}
	}
	return t
}

// buildNibbleUnrank enumerates every sorted quadruple and records it under
// its rank.
func buildNibbleUnrank() (t [1 << rankBits]uint16) {
	for n3 := range 16 {
		for n2 := range n3 + 1 {
			for n1 := range n2 + 1 {
				for n0 := range n1 + 1 {
					q := uint16(n0 | n1<<4 | n2<<8 | n3<<12)
					t[rankOf(q)] = q
				}
			}
		}
	}
	return t
}

// rankOf returns the rank of a sorted nibble quadruple n0 | n1<<4 | ...
func rankOf(q uint16) uint64 {
	return uint64(nibbleRank[0][q&15]) + uint64(nibbleRank[1][q>>4&15]) +
		uint64(nibbleRank[2][q>>8&15]) + uint64(nibbleRank[3][q>>12])
}

// sortLanes sorts the four 16-bit lanes of w ascending.
func sortLanes(w uint64) uint64 {
	a, b, c, d := sort4(int32(uint16(w)), int32(uint16(w>>16)), int32(uint16(w>>32)), int32(uint16(w>>48)))
	return uint64(a) | uint64(b)<<16 | uint64(c)<<32 | uint64(d)<<48
}

// sort4 sorts four lane values with a five-exchange sorting network.
// Bucket contents are random, so a branch per comparison would mispredict
// half the time; see compareExchange.
func sort4(a, b, c, d int32) (int32, int32, int32, int32) {
	a, b = compareExchange(a, b)
	c, d = compareExchange(c, d)
	a, c = compareExchange(a, c)
	b, d = compareExchange(b, d)
	b, c = compareExchange(b, c)
	return a, b, c, d
}

// compareExchange returns min(a, b), max(a, b). The maximum is derived as
// a + b - min rather than with the max builtin: a min/max pair per
// exchange is compiled (Go 1.26, amd64) to branches, a lone min to one
// CMOV, which makes the network branch-free.
func compareExchange(a, b int32) (int32, int32) {
	lo := min(a, b)
	return lo, a + b - lo
}

// encodeBucket sorts a logical word of 13-bit fingerprints and packs it:
// the canonical image of any bucket content. Sorting and ranking work on
// the four lane values directly, without rebuilding the sorted word, which
// keeps the dependency chain of a bucket write short.
func encodeBucket(w uint64) uint64 {
	return packLanes(sort4(int32(uint16(w)), int32(uint16(w>>16)), int32(uint16(w>>32)), int32(uint16(w>>48))))
}

// packLanes packs four sorted 13-bit fingerprints: the rank of their
// nibbles (four independent table loads) and their remainders.
func packLanes(a, b, c, d int32) uint64 {
	rank := uint64(nibbleRank[0][uint16(a)>>nibbleShift]) + uint64(nibbleRank[1][uint16(b)>>nibbleShift]) +
		uint64(nibbleRank[2][uint16(c)>>nibbleShift]) + uint64(nibbleRank[3][uint16(d)>>nibbleShift])
	lows := uint64(a&lowMask) | uint64(b&lowMask)<<9 | uint64(c&lowMask)<<18 | uint64(d&lowMask)<<27
	return rank | lows<<rankBits
}

// unpackBucket decodes a 48-bit image into the logical word: lane s holds
// nibble s above low s. The decode is branch-free: one table load and
// shifts that spread the nibbles and the 9-bit remainders into lanes.
func unpackBucket(im uint64) uint64 {
	q := uint64(nibbleUnrank[im&rankMask])
	nibbles := q&15 | q&0xf0<<12 | q&0xf00<<24 | q&0xf000<<36
	x := im >> rankBits
	lows := x&lowMask | x&(lowMask<<9)<<7 | x&(lowMask<<18)<<14 | x&(lowMask<<27)<<21
	return nibbles<<nibbleShift | lows
}

// canonicalImage reports whether im is a valid stored compact bucket: 48
// bits, a rank below 3876, and fingerprints in ascending order.
func canonicalImage(im uint64) bool {
	if im > imageMask || im&rankMask >= sortedNibbleSets {
		return false
	}
	w := unpackBucket(im)
	return sortLanes(w) == w
}

// loadImage reads compact bucket i with one unaligned 8-byte load; the
// padding after the last bucket keeps the load in bounds.
func loadImage(p []byte, i uint64) uint64 {
	return binary.LittleEndian.Uint64(p[i*compactBucketBytes:]) & imageMask
}

// storeImage writes the 6 bytes of compact bucket i and nothing else.
func storeImage(p []byte, i, im uint64) {
	putImage(KindCuckooCompact, p[i*compactBucketBytes:], im)
}
