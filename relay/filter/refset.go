package filter

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/kvrouter/kvrouter/routing"
)

// RefSet is the producer's exact membership in front of a summary: a
// reference count per block, one summary entry per block with a non-zero
// count. A block held by three engines is one entry; it leaves the summary
// when the last engine drops it. Because the summary is only ever asked to
// delete what the RefSet inserted, cuckoo deletes can never remove another
// block's fingerprint.
//
// A RefSet is not safe for concurrent use: its owner (the pool's producer)
// serialises calls. The Summary it returns may be read concurrently only
// while the owner does not mutate the RefSet.
type RefSet struct {
	cfg        Config
	rng        *rand.Rand
	refs       map[routing.SeqHash]ref
	summary    mutableSummary
	omitted    int
	stale      int
	generation uint64
}

// ref is one block's exact state: how many holders it has and whether its
// entry is in the summary (false after a failed cuckoo insert).
type ref struct {
	count    int
	resident bool
}

// errNoDelete is returned by summaries that cannot delete (Bloom); the
// RefSet counts the entry as stale until the next rebuild.
var errNoDelete = errors.New("filter: summary cannot delete")

// NewRefSet returns an empty RefSet over a summary of cfg.Kind. rng drives
// cuckoo evictions; nil derives one from cfg.Seed.
func NewRefSet(cfg Config, rng *rand.Rand) (*RefSet, error) {
	cfg.EnsureDefaults()
	s, err := newSummary(cfg, rng)
	if err != nil {
		return nil, err
	}
	if rng == nil {
		rng = rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Capacity)))
	}
	return &RefSet{cfg: cfg, rng: rng, refs: make(map[routing.SeqHash]ref), summary: s}, nil
}

// Add takes one reference on h. On the first reference (or on a later one
// while h is omitted) it inserts h into the summary. If that insert fails
// the reference is still recorded, h is counted in Omitted (a false
// negative of the summary until Rebuild) and the error wraps ErrFull.
func (r *RefSet) Add(h routing.SeqHash) error {
	e, ok := r.refs[h]
	e.count++
	if ok && e.resident {
		r.refs[h] = e
		return nil
	}
	err := r.summary.insert(h)
	switch {
	case err == nil && ok:
		r.omitted--
	case err != nil && !ok:
		r.omitted++
	}
	e.resident = err == nil
	r.refs[h] = e
	if err != nil {
		return fmt.Errorf("block %#x recorded but omitted from the summary: %w", uint64(h), err)
	}
	return nil
}

// Remove drops one reference on h and deletes h from the summary when the
// count reaches zero. Removing a block with no references returns
// ErrNotHeld and touches nothing. With a Bloom summary the entry stays set
// until the next Rebuild and is counted in Stale.
func (r *RefSet) Remove(h routing.SeqHash) error {
	e, ok := r.refs[h]
	if !ok {
		return fmt.Errorf("%w: block %#x", ErrNotHeld, uint64(h))
	}
	if e.count > 1 {
		e.count--
		r.refs[h] = e
		return nil
	}
	delete(r.refs, h)
	if !e.resident {
		r.omitted--
		return nil
	}
	err := r.summary.remove(h)
	if errors.Is(err, errNoDelete) {
		r.stale++
		return nil
	}
	if err != nil {
		return fmt.Errorf("summary lost an entry the exact set holds: %w", err)
	}
	return nil
}

// Refs returns the reference count of h.
func (r *RefSet) Refs(h routing.SeqHash) int { return r.refs[h].count }

// Len returns the number of distinct blocks with a reference.
func (r *RefSet) Len() int { return len(r.refs) }

// Summary returns the current summary. Rebuild replaces it, so callers
// should not keep it across a Generation change.
func (r *RefSet) Summary() Summary { return r.summary }

// Omitted returns how many held blocks are missing from the summary after
// failed inserts: the summary's only source of false negatives.
func (r *RefSet) Omitted() int { return r.omitted }

// Stale returns how many deletes a Bloom summary has not applied yet, an
// upper bound on the entries it holds beyond the exact set.
func (r *RefSet) Stale() int { return r.stale }

// Capacity returns the capacity the current summary was sized for.
func (r *RefSet) Capacity() int { return r.cfg.Capacity }

// Generation counts rebuilds. A new generation has a new layout (and for a
// cuckoo summary possibly a new bucket count), so subscribers need a full
// snapshot; deltas never cross generations.
func (r *RefSet) Generation() uint64 { return r.generation }

// Rebuild replaces the summary by a fresh one sized for capacity (0 keeps
// the current capacity; either is raised to Len) holding every held block.
// This is how a Bloom summary rotates out its stale entries and how a full
// cuckoo summary grows. Blocks are inserted in hash order so the layout is
// reproducible. On failure the old summary stays in place.
func (r *RefSet) Rebuild(capacity int) error {
	cfg := r.cfg
	cfg.Capacity = max(capacity, len(r.refs), 1)
	if capacity == 0 {
		cfg.Capacity = max(r.cfg.Capacity, len(r.refs))
	}
	s, err := newSummary(cfg, r.rng)
	if err != nil {
		return err
	}
	keys := make([]routing.SeqHash, 0, len(r.refs))
	for h := range r.refs {
		keys = append(keys, h)
	}
	slices.Sort(keys)
	for _, h := range keys {
		if err := s.insert(h); err != nil {
			return fmt.Errorf("rebuild at capacity %d: %w", cfg.Capacity, err)
		}
	}
	r.commit(cfg, s)
	return nil
}

// Grow rebuilds into a summary with twice the capacity.
func (r *RefSet) Grow() error {
	return r.Rebuild(2 * max(r.cfg.Capacity, len(r.refs)))
}

// commit installs a rebuilt summary in which every held block is resident.
func (r *RefSet) commit(cfg Config, s mutableSummary) {
	if r.omitted > 0 {
		for h, e := range r.refs {
			e.resident = true
			r.refs[h] = e
		}
	}
	r.cfg, r.summary = cfg, s
	r.omitted, r.stale = 0, 0
	r.generation++
}
