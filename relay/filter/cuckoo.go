package filter

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/kvrouter/kvrouter/routing"
)

// Cuckoo is a packed-bucket cuckoo filter over block hashes: a power-of-two
// array of buckets of four fingerprint slots, where a block lives in one of
// two buckets related by partial-key cuckoo hashing. Its kind fixes the
// bucket layout: KindCuckoo stores 16-bit fingerprints in one uint64 per
// bucket, KindCuckooCompact stores 13-bit fingerprints in semi-sorted
// 6-byte buckets. Both kinds share every algorithm: they read and write
// buckets as the same logical word of four 16-bit lanes (layout.go).
//
// A Cuckoo is not safe for concurrent use. Read-only methods (Contains,
// ContainsPrefix, Len, MarshalBinary, Diff) may run concurrently with each
// other when no mutating method runs.
type Cuckoo struct {
	kind     Kind
	addr     addressing
	words    []uint64 // KindCuckoo: bucket i is words[i]
	packed   []byte   // KindCuckooCompact: bucket i is bytes [6i, 6i+6)
	count    int
	maxKicks int
	rng      *rand.Rand
	undo     []undoEntry
	changes  *changeLog
}

// undoEntry remembers a bucket's stored image before an eviction overwrote
// it, so a failed insert can be rolled back byte for byte.
type undoEntry struct {
	bucket uint64
	image  uint64
}

var (
	_ Summary        = (*Cuckoo)(nil)
	_ mutableSummary = (*Cuckoo)(nil)
)

// NewCuckoo returns an empty cuckoo filter sized by cfg (after
// EnsureDefaults). cfg.Kind selects the layout: KindCuckooCompact gives
// semi-sorted 13-bit buckets, any other kind the 16-bit layout. rng drives
// the choice of eviction victims; nil means a generator seeded from
// cfg.Seed, so a filter built from the same inserts in the same order has
// the same layout.
func NewCuckoo(cfg Config, rng *rand.Rand) (*Cuckoo, error) {
	if cfg.Kind != KindCuckooCompact {
		cfg.Kind = KindCuckoo
	}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newCuckoo(cfg.Kind, cfg.Seed, cfg.cuckooBuckets(), cfg.MaxKicks, rng), nil
}

// newCuckoo builds an empty filter of a validated kind and geometry.
func newCuckoo(kind Kind, seed, buckets uint64, maxKicks int, rng *rand.Rand) *Cuckoo {
	if rng == nil {
		rng = rand.New(rand.NewPCG(seed, buckets))
	}
	c := &Cuckoo{
		kind:     kind,
		addr:     newAddressing(seed, buckets, kind.fingerprintWidth()),
		maxKicks: maxKicks,
		rng:      rng,
	}
	c.allocate(buckets)
	return c
}

// Kind returns KindCuckoo or KindCuckooCompact.
func (c *Cuckoo) Kind() Kind { return c.kind }

// Len returns the number of fingerprints stored.
func (c *Cuckoo) Len() int { return c.count }

// Buckets returns the bucket count, a power of two.
func (c *Cuckoo) Buckets() int { return int(c.addr.mask + 1) }

// Seed returns the addressing seed.
func (c *Cuckoo) Seed() uint64 { return c.addr.seed }

// LoadFactor returns the fraction of slots in use.
func (c *Cuckoo) LoadFactor() float64 {
	return float64(c.count) / float64(c.Buckets()*slotsPerBucket)
}

// SizeBytes returns the size of the bucket storage: 8 bytes per bucket, or
// 6 per compact bucket plus the 2-byte load padding.
func (c *Cuckoo) SizeBytes() int { return len(c.words)*8 + len(c.packed) }

// FalsePositiveRate returns the expected false-positive rate at the current
// load α: 1 - (1 - 1/(2^f-1))^(2·4·α) for f-bit fingerprints, about
// 1.22e-4·α (f = 16) or 9.77e-4·α (f = 13). A lookup compares against at
// most 2·4·α occupied slots, each matching a random nonzero f-bit
// fingerprint with probability 1/(2^f-1).
func (c *Cuckoo) FalsePositiveRate() float64 {
	probes := 2 * slotsPerBucket * c.LoadFactor()
	return 1 - math.Pow(1-1/float64(uint64(1)<<c.kind.fingerprintWidth()-1), probes)
}

// Contains reports whether h is probably in the filter. It never returns
// false for an inserted and not deleted block.
func (c *Cuckoo) Contains(h routing.SeqHash) bool {
	fp, i := c.addr.locate(h)
	if c.packed != nil {
		return c.containsPacked(fp, i)
	}
	if matchLanes(c.words[i], fp) != 0 {
		return true
	}
	return matchLanes(c.words[c.addr.alt(i, fp)], fp) != 0
}

// A Probe is a block's lookup located in one filter: where its two
// candidate buckets are and its fingerprint, before either is read. It
// points into the filter's storage, so it is valid while the filter is
// not written (under the caller's read lock).
type Probe struct {
	w  [2]*uint64  // the buckets of a KindCuckoo filter
	b  [2]*[8]byte // or the 8 bytes from each bucket of a compact one
	fp uint16
	// read holds the two buckets between HitAll's loops.
	read [2]uint64
}

// LocateInto sets *p to h's probe in c.
func (c *Cuckoo) LocateInto(p *Probe, h routing.SeqHash) {
	fp, i := c.addr.locate(h)
	j := c.addr.alt(i, fp)
	p.fp = fp
	if c.packed != nil {
		// The padding after the last bucket keeps every 8-byte read in
		// range.
		p.w = [2]*uint64{}
		p.b = [2]*[8]byte{(*[8]byte)(c.packed[i*compactBucketBytes:]), (*[8]byte)(c.packed[j*compactBucketBytes:])}
		return
	}
	p.w = [2]*uint64{&c.words[i], &c.words[j]}
}

// HitAll sets hits[k] to 1 if ps[k]'s block is probably present in its
// filter and to 0 if not, for probes of any filters, as Contains would
// answer. It reads every probe's buckets in a loop that does nothing else,
// then matches their fingerprints: with the filters out of cache the
// reads' misses are then all in flight at once, where a loop of Contains
// calls keeps only a few (the matching after each read, and the branch on
// its answer, fill the processor's window). Cold, a probe costs less than
// half a Contains call this way, hot about one and a half
// (BenchmarkProbeCost in relay/consumer).
// hits must be at least as long as ps.
func HitAll(ps []Probe, hits []uint64) {
	for k := range ps {
		p := &ps[k]
		if p.w[0] != nil {
			p.read = [2]uint64{*p.w[0], *p.w[1]}
		} else {
			p.read = [2]uint64{binary.LittleEndian.Uint64(p.b[0][:]), binary.LittleEndian.Uint64(p.b[1][:])}
		}
	}
	hits = hits[:len(ps)]
	for k := range ps {
		p := &ps[k]
		x, y := p.read[0], p.read[1]
		if p.w[0] == nil {
			x, y = unpackBucket(x&imageMask), unpackBucket(y&imageMask)
		}
		m := matchLanes(x, p.fp) | matchLanes(y, p.fp)
		hits[k] = (m | -m) >> 63
	}
}

// ContainsPrefix returns the length of the longest prefix of hs all of whose
// blocks are probably present: it stops at the first miss.
func (c *Cuckoo) ContainsPrefix(hs []routing.SeqHash) int {
	for n, h := range hs {
		if !c.Contains(h) {
			return n
		}
	}
	return len(hs)
}

// Delete removes one copy of h's fingerprint. Only a block that was
// inserted may be deleted: deleting another block that happens to share the
// fingerprint and a bucket would remove that block's entry and cause a false
// negative. ErrNotFound leaves the filter unchanged.
func (c *Cuckoo) Delete(h routing.SeqHash) error {
	fp, i := c.addr.locate(h)
	if c.clear(i, fp) || c.clear(c.addr.alt(i, fp), fp) {
		c.count--
		return nil
	}
	return fmt.Errorf("%w: block %#x", ErrNotFound, uint64(h))
}

// clear empties the lowest lane of bucket i holding fp.
func (c *Cuckoo) clear(i uint64, fp uint16) bool {
	w := c.bucket(i)
	m := matchLanes(w, fp)
	if m == 0 {
		return false
	}
	c.set(i, w&^(0xffff<<laneShift(m)))
	return true
}

// insert and remove let a RefSet drive a Cuckoo through mutableSummary.
func (c *Cuckoo) insert(h routing.SeqHash) error { return c.Insert(h) }
func (c *Cuckoo) remove(h routing.SeqHash) error { return c.Delete(h) }
