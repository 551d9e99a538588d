package filter

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/kvrouter/kvrouter/routing"
)

// Cuckoo is a packed-bucket cuckoo filter over block hashes: a power-of-two
// array of uint64 buckets, each holding four 16-bit fingerprints, where a
// block lives in one of two buckets related by partial-key cuckoo hashing.
//
// A Cuckoo is not safe for concurrent use. Read-only methods (Contains,
// ContainsPrefix, Len, MarshalBinary, Diff) may run concurrently with each
// other when no mutating method runs.
type Cuckoo struct {
	addr     addressing
	words    []uint64
	count    int
	maxKicks int
	rng      *rand.Rand
	undo     []undoEntry
	changes  *changeLog
}

// undoEntry remembers a bucket's word before an eviction overwrote it, so a
// failed insert can be rolled back.
type undoEntry struct {
	bucket uint64
	word   uint64
}

var (
	_ Summary        = (*Cuckoo)(nil)
	_ mutableSummary = (*Cuckoo)(nil)
)

// NewCuckoo returns an empty cuckoo filter sized by cfg (after
// EnsureDefaults; cfg.Kind is ignored). rng drives the choice of eviction
// victims; nil means a generator seeded from cfg.Seed, so a filter built
// from the same inserts in the same order has the same layout.
func NewCuckoo(cfg Config, rng *rand.Rand) (*Cuckoo, error) {
	cfg.Kind = KindCuckoo
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newCuckoo(cfg.Seed, cfg.cuckooBuckets(), cfg.MaxKicks, rng), nil
}

// newCuckoo builds an empty filter of a validated geometry.
func newCuckoo(seed, buckets uint64, maxKicks int, rng *rand.Rand) *Cuckoo {
	if rng == nil {
		rng = rand.New(rand.NewPCG(seed, buckets))
	}
	return &Cuckoo{
		addr:     newAddressing(seed, buckets),
		words:    make([]uint64, buckets),
		maxKicks: maxKicks,
		rng:      rng,
	}
}

// Kind returns KindCuckoo.
func (c *Cuckoo) Kind() Kind { return KindCuckoo }

// Len returns the number of fingerprints stored.
func (c *Cuckoo) Len() int { return c.count }

// Buckets returns the bucket count, a power of two.
func (c *Cuckoo) Buckets() int { return len(c.words) }

// Seed returns the addressing seed.
func (c *Cuckoo) Seed() uint64 { return c.addr.seed }

// LoadFactor returns the fraction of slots in use.
func (c *Cuckoo) LoadFactor() float64 {
	return float64(c.count) / float64(len(c.words)*slotsPerBucket)
}

// SizeBytes returns the size of the bucket array.
func (c *Cuckoo) SizeBytes() int { return len(c.words) * 8 }

// FalsePositiveRate returns the expected false-positive rate at the current
// load α: 1 - (1 - 1/(2^16-1))^(2·4·α), about 1.22e-4·α. A lookup compares
// against at most 2·4·α occupied slots, each matching a random 16-bit
// fingerprint with probability 1/(2^16-1).
func (c *Cuckoo) FalsePositiveRate() float64 {
	probes := 2 * slotsPerBucket * c.LoadFactor()
	return 1 - math.Pow(1-1/float64(1<<fingerprintBits-1), probes)
}

// Contains reports whether h is probably in the filter. It never returns
// false for an inserted and not deleted block.
func (c *Cuckoo) Contains(h routing.SeqHash) bool {
	fp, i := c.addr.locate(h)
	if matchLanes(c.words[i], fp) != 0 {
		return true
	}
	return matchLanes(c.words[c.addr.alt(i, fp)], fp) != 0
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
	w := c.words[i]
	m := matchLanes(w, fp)
	if m == 0 {
		return false
	}
	c.set(i, w&^(0xffff<<laneShift(m)))
	return true
}

// set is the only writer of bucket words, so change tracking sees every
// write.
func (c *Cuckoo) set(i, w uint64) {
	if c.changes != nil {
		c.changes.note(i, c.words[i])
	}
	c.words[i] = w
}

// insert and remove let a RefSet drive a Cuckoo through mutableSummary.
func (c *Cuckoo) insert(h routing.SeqHash) error { return c.Insert(h) }
func (c *Cuckoo) remove(h routing.SeqHash) error { return c.Delete(h) }
