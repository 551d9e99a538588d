// Package filter holds the compact, lossy summaries a DC relay publishes of
// its pool's KV block set, so that other DCs can search request prefixes
// without the exact index: a packed-bucket cuckoo filter (Cuckoo) in two
// layouts, KindCuckoo (16-bit fingerprints) and KindCuckooCompact
// (semi-sorted 13-bit fingerprints), a Bloom filter (Bloom, on
// github.com/bits-and-blooms/bloom/v3), the Summary interface they all
// satisfy so a pool can select any, and RefSet, the producer's exact,
// reference-counted membership in front of a summary.
//
// # Cuckoo layout
//
// A Cuckoo is a power-of-two array of buckets of four fingerprint slots
// (0 = empty slot), so a lookup reads at most two buckets. A block hash h
// (already an XXH3 output) is mixed with the filter's seed (MurmurHash3
// fmix64); the top f bits are the fingerprint (0 becomes 1) and the low bits
// the primary bucket i. The alternate bucket is i XOR (odd hash of the
// fingerprint), partial-key cuckoo hashing: an evicted fingerprint finds its
// other bucket without its block hash, and the map is an involution that
// never maps a bucket to itself. An insert that finds both buckets full
// first looks one step ahead: a fingerprint of either bucket whose
// alternate has an empty lane moves there and fp takes its place. Only if
// none can, it evicts random victims along a walk of at most MaxKicks
// (default 500), looking ahead the same way at every step; if the walk
// fails, every touched bucket is restored in reverse order and ErrFull is
// returned, so a failed insert leaves the filter byte-identical. The
// look-ahead's loads depend only on buckets already read, so their cache
// misses overlap; filling 2^18 buckets to 95% takes 110,000 dependent walk
// steps with it and 900,000 without, which halved the mean insert.
//
// Both layouts share all of that code: algorithms see a bucket as one
// logical uint64 of four 16-bit lanes searched with SWAR (broadcast XOR,
// zero-lane test), and only reading and writing a bucket differ (layout.go).
// A lane here is a 16-bit field of that word, one fingerprint slot; it is
// unrelated to the consumer's lanes (remote pools, relay/consumer).
//
//   - KindCuckoo, f = 16: the logical word is stored as is, 8 bytes per
//     bucket.
//   - KindCuckooCompact, f = 13: semi-sorted buckets (Fan et al., "Cuckoo
//     Filter: Practically Better Than Bloom", §5.2). The four fingerprints
//     are kept in ascending order; their high nibbles then form a sorted
//     multiset of four values in 0..15, one of C(19,4) = 3876, stored as a
//     12-bit rank, followed by the four 9-bit remainders: 48 bits, 6 bytes
//     per bucket, in a []byte with 2 bytes of padding so that every bucket
//     is read with one unaligned 8-byte load. Decoding is one lookup in a
//     4096-entry uint16 table (8 KiB, stays in L1) plus shifts; encoding
//     ranks with the combinatorial number system for multisets (four
//     lookups in a 4x16 binomial table and three adds), chosen over a full
//     encode table (64 Ki entries, 128 KiB) that would evict the bucket
//     data. Every write sorts the lanes with a branch-free network, so each
//     multiset has one canonical image; decoders reject any other, which
//     keeps re-encoding byte-exact and Diff a plain comparison.
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
//     and never allocate more than the input's size; malformed input
//     (including a non-canonical compact bucket) wraps ErrCorrupt, a
//     well-formed encoding this build cannot use wraps ErrUnsupported.
//     Everything they accept re-encodes byte for byte.
//   - Determinism: layouts depend only on the seed, the injected
//     *rand.Rand and the order of operations; Rebuild inserts in hash order.
//
// # False-positive rates and size
//
// Cuckoo, f fingerprint bits, b = 4 slots, load α (entries/slots): a miss
// is compared with at most 2bα occupied slots, each equal to a random
// nonzero fingerprint with probability 1/(2^f − 1), so
// ε = 1 − (1 − 1/(2^f − 1))^(8α) ≈ 8α/(2^f − 1). Bits per entry are
// 64/(4α) for f = 16 and 48/(4α) for the compact layout (f − 1 bits per
// slot). At α = 0.95:
//
//	kind            bits/entry  ε formula  ε measured
//	cuckoo          16.84       1.16e-4    1.00e-4 .. 1.15e-4
//	cuckoo-compact  12.63       9.28e-4    9.39e-4 .. 9.40e-4
//
// Measured over 10^6 absent keys on 2^18 buckets (BenchmarkFalsePositiveRate)
// and over 10^6 (16-bit) or 2·10^6 (compact) keys on 2^14 buckets
// (TestCuckooFalsePositiveRate, TestCompactFalsePositiveRate, fixed seeds).
// The compact figure is 6% under the 0.1% target, about 4 standard
// deviations of a 2·10^6-probe estimate, and within 1.3% of the formula:
// deterministic and not borderline. ε grows linearly with α and the formula
// stays below 0.1% up to a completely full table (9.76e-4 at α = 1).
//
// Bloom, m bits, k hashes, n entries: ε = (1 − e^(−kn/m))^k, minimised by
// k = (m/n)·ln 2 at m/n = 1.44·log2(1/ε) bits per entry: 18.86 bits (k = 14)
// at the 16-bit cuckoo's 1.16e-4, measured 1.22e-4 to 1.34e-4, and 14.53
// bits (k = 11) at the compact cuckoo's 9.28e-4, measured 9.3e-4 to 9.7e-4.
//
// # Measured speed
//
// 2^18 buckets at 95% load (996,147 entries; 2 MiB at 16 bits, 1.5 MiB
// compact) against Bloom filters of the same entries at each cuckoo's rate,
// on the shared 2-core development machine, one run of
//
//	go test -run '^$' -bench 'Insert|Lookup' -benchtime 1s -count 3 ./relay/filter
//
// (ns per operation, range over the three runs; insert is averaged over
// filling an empty filter to 95%, evictions included):
//
//	kind                  bits/entry  lookup hit  lookup miss  insert
//	cuckoo                16.84       24 .. 28    16 .. 20     43 .. 50
//	cuckoo-compact        12.63       29 .. 33    32 .. 35     59 .. 75
//	bloom at 1.16e-4      18.86       136 .. 170  108 .. 116   160 .. 209
//	bloom at 9.28e-4      14.53       114 .. 148  111 .. 122   135 .. 167
//
// The machine is shared and noisy (load average about 1 during these
// runs); the lookup (60 ns) and insert (100 ns) targets hold in every run.
// Filling in-cache tables (2^10 buckets) shows where the compact layout's
// extra ~20 ns per insert goes: bucket encodes (sort and rank) and decodes,
// each a dependent chain of 20 to 35 cycles; a lookup pays two decodes, 6
// to 10 ns.
//
// # Batched lookups
//
// Contains answers one block, and a loop of Contains calls over filters
// out of cache overlaps few of its misses: the fingerprint matching after
// each read, and the branch on its answer, fill the processor's window.
// Cuckoo.LocateInto and HitAll split a lookup in two: LocateInto computes
// where a block's two buckets are, and HitAll reads the buckets of many
// probes, of any filters, in a loop that does nothing else before it
// matches any of them. Cold, that makes a probe 2 to 2.5 times cheaper;
// hot it is a little dearer, since both buckets are always read. The
// consumer's decision search reads each of its rounds this way.
//
// # Which kind wins
//
// Cuckoo (either layout): deletes in place (the producer follows engine
// evictions without rebuilding), ships changes as deltas, and a lookup is
// two bucket reads instead of k bit probes (3 to 6 times faster here). It
// can refuse inserts near full load, and its rate is fixed by the
// fingerprint width: bits per entry are about (log2(1/ε) + 3)/α at f = 16
// and (log2(1/ε) + 2)/α semi-sorted, against Bloom's 1.44·log2(1/ε), so
// at α = 0.95 the 16-bit layout is smaller than Bloom below ε ≈ 0.4% and
// the semi-sorted one below ε ≈ 3%.
//
//   - KindCuckoo: the lower rate, 1.2e-4 at 16.84 bits per entry, and the
//     fastest inserts and lookups. Choose it when false positives are
//     expensive (a wrongly routed prefix costs a cross-DC fetch) or when
//     insert throughput matters more than size.
//   - KindCuckooCompact: 25% smaller (12.63 bits per entry) at 9.3e-4, 13%
//     smaller than a Bloom filter of the same rate, with lookups still 3 to
//     4 times faster than Bloom. Choose it when snapshot size and memory per
//     remote pool dominate and a 0.1% false-positive rate is acceptable.
//
// Bloom: simpler, never refuses an insert (it degrades gracefully past its
// capacity), any rate is a sizing choice, and a rebuild is a cheap linear
// pass. It cannot delete, so removed blocks stay as extra false positives
// (RefSet.Stale) until the owner rotates it with RefSet.Rebuild, which a
// subscriber must fetch as a whole snapshot; its deltas carry only what
// inserts set, one word image per set bit's word (about k words per
// block, against one or two buckets for a cuckoo insert), and lookups are
// k bit reads. Prefer it for pools whose block set churns little: under
// churn the rebuilds' snapshots dominate its WAN cost (docs/benchmarks.md;
// relay/producer/bloom.go has the rebuild rule).
//
// # Wire encoding and deltas
//
// MarshalBinary writes a 40-byte versioned header (magic "KVRF", format
// version, kind, seed, size, fingerprint and slot parameters, entry count,
// body length), the body (8-byte bucket words, 6-byte compact buckets or
// Bloom bit-array words, little-endian) and an XXH3 checksum; codec.go
// documents the layout. For cuckoo filters of one kind and geometry, Diff
// or the change log (TrackChanges/TakeChanges) produce a Delta of absolute
// bucket images (12 bytes each on the wire, 10 for the compact kind),
// which Apply installs after validating all of it; a delta whose declared
// entry count does not match is refused with ErrBase, the signal to fetch a
// fresh snapshot. A Bloom filter's change log and deltas work the same way
// over the 64-bit words of its bit array (bloom_delta.go, 12 bytes per
// word on the wire), with only the words inserts set, since it cannot
// delete. Every kind has deltas (Kind.HasDeltas); Kind.IsCuckoo names the
// cuckoo layouts. Rebuilds change the layout (RefSet.Generation) and
// always require a full snapshot.
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
// call. Read-only methods (Contains, ContainsPrefix, LocateInto, Len,
// MarshalBinary, Diff) and HitAll may run concurrently with each other
// while nothing mutates the filter; a consumer that applies deltas while
// serving queries must guard it itself.
package filter
