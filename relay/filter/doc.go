// Package filter holds the compact, lossy summaries a DC relay publishes of
// its pool's KV block set, so that other DCs can search request prefixes
// without the exact index: a packed-bucket cuckoo filter (Cuckoo), a Bloom
// filter (Bloom, on github.com/bits-and-blooms/bloom/v3), the Summary
// interface both satisfy so a pool can select either, and RefSet, the
// producer's exact, reference-counted membership in front of a summary.
//
// # Cuckoo layout
//
// A Cuckoo is a power-of-two array of uint64 buckets, each packing four
// 16-bit fingerprints (0 = empty slot), so one bucket is one word and a
// lookup reads at most two words. A block hash h (already an XXH3 output)
// is mixed with the filter's seed (MurmurHash3 fmix64); the top 16 bits are
// the fingerprint (0 becomes 1) and the low bits the primary bucket i. The
// alternate bucket is i XOR (odd hash of the fingerprint), partial-key
// cuckoo hashing: an evicted fingerprint finds its other bucket without its
// block hash, and the map is an involution that never maps a bucket to
// itself. An insert that finds both buckets full evicts random victims
// along a walk of at most MaxKicks (default 500); if the walk fails, every
// touched bucket is restored in reverse order and ErrFull is returned, so a
// failed insert leaves the filter exactly as before.
//
// # Guarantees
//
//   - No false negatives: Contains is true for every block inserted and not
//     deleted (Cuckoo) or added since the last rebuild (Bloom). Through a
//     RefSet, every held block is present except those reported by Omitted
//     (inserts that hit ErrFull), until Rebuild or Grow re-admits them.
//   - Deletes are safe: a cuckoo delete clears one copy of a fingerprint and
//     would remove another block's entry if asked to delete a block never
//     inserted. RefSet only deletes what it inserted, once its reference
//     count falls to zero; removing an unheld block returns ErrNotHeld and
//     never touches the filter. A block held by several engines is one
//     entry.
//   - ContainsPrefix(hs) is the length of the longest prefix of hs whose
//     blocks all test present; it probes linearly and stops at the first
//     miss, so it is exact with respect to Contains.
//   - Decoders (Decode, DecodeCuckoo, DecodeBloom, DecodeDelta) never panic
//     and never allocate more than the input's size; malformed input wraps
//     ErrCorrupt, a well-formed encoding this build cannot use wraps
//     ErrUnsupported. Everything they accept re-encodes byte for byte.
//   - Determinism: layouts depend only on the seed, the injected
//     *rand.Rand and the order of operations; Rebuild inserts in hash order.
//
// # False-positive rates and size
//
// Cuckoo, f = 16 fingerprint bits, b = 4 slots, load α (entries/slots):
// ε = 1 − (1 − 1/(2^f − 1))^(2bα) ≈ 8α/65535, i.e. 1.16e-4 at α = 0.95,
// for 64/(4α) = 16.84 bits per entry. Measured at α = 0.95 over 10^6 absent
// keys: 1.15e-4 (TestCuckooFalsePositiveRate, 2^14 buckets) and 1.07e-4
// (BenchmarkLookup, 2^18 buckets).
//
// Bloom, m bits, k hashes, n entries: ε = (1 − e^(−kn/m))^k, minimised by
// k = (m/n)·ln 2 at m/n = 1.44·log2(1/ε) bits per entry. At the cuckoo's
// 1.16e-4 that is m/n = 18.86 bits and k = 14; measured 1.22e-4 to 1.34e-4.
//
// # Which kind wins
//
// Cuckoo: deletes in place (the producer follows engine evictions without
// rebuilding), a lookup is two word reads instead of k bit probes (several
// times faster here), and it is smaller whenever the target rate is low:
// bits per entry are (log2(1/ε) + 3)/α against Bloom's 1.44·log2(1/ε), so
// at α = 0.95 the cuckoo filter is smaller below ε ≈ 0.4% (below ≈ 3% with
// semi-sorted buckets, which this package does not implement). Its rate is
// fixed by the 16-bit fingerprints; it can refuse inserts near full load.
//
// Bloom: simpler, never refuses an insert (it degrades gracefully past its
// capacity), any rate is a sizing choice, and a rebuild is a cheap linear
// pass. It cannot delete, so removed blocks stay as extra false positives
// (RefSet.Stale) until the owner rotates it with RefSet.Rebuild. Prefer it
// for pools whose block set churns little.
//
// # Wire encoding and deltas
//
// MarshalBinary writes a 40-byte versioned header (magic "KVRF", format
// version, kind, seed, size, fingerprint and slot parameters, entry count,
// body length), the body (bucket or bit-array words, little-endian) and an
// XXH3 checksum; codec.go documents the layout. For cuckoo filters of one
// geometry, Diff or the change log (TrackChanges/TakeChanges) produce a
// Delta of absolute bucket images, which Apply installs after validating
// all of it; a delta whose declared entry count does not match is refused
// with ErrBase, the signal to fetch a fresh snapshot. Rebuilds change the
// layout (RefSet.Generation) and always require a full snapshot.
//
// # What it refuses to do
//
// It does not resize a filter in place (RefSet rebuilds), does not delete
// from a Bloom filter, does not search by galloping (the consumer does,
// over ContainsPrefix-style probes), and does not synchronise.
//
// # Concurrency
//
// No type in this package is safe for concurrent use. A RefSet and its
// summary belong to one owner, the pool's producer, which serialises every
// call. Read-only methods (Contains, ContainsPrefix, Len, MarshalBinary,
// Diff) may run concurrently with each other while nothing mutates the
// filter; a consumer that applies deltas while serving queries must guard
// the filter itself.
package filter
