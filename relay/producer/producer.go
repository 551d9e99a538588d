package producer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/routing"
)

// Producer keeps one pool's exact, reference-counted block ownership, the
// summary in front of it, and the publication state: epoch, sequence
// numbers and the subscriber feeds. All methods are safe for concurrent use;
// one mutex serialises them, so a subscription's snapshot and the deltas
// after it are always consistent.
type Producer struct {
	mu        sync.Mutex
	cfg       Config
	pool      PoolID
	rng       *rand.Rand
	refs      *filter.RefSet
	summary   filter.Summary
	owners    map[routing.Worker]map[routing.SeqHash]struct{}
	epoch     uint64
	seq       uint64
	count     int // the entry count the last publication declared
	lastIndex uint64
	load      Load
	feeds     map[*Feed]struct{}
	snap      snapshotCache
	stats     Stats
	closed    bool
}

// snapshotCache keeps the encoding of the filter at (epoch, seq), so that
// subscribers arriving between two publications share one encoding.
type snapshotCache struct {
	epoch, seq uint64
	data       []byte
}

// New returns an empty producer for pool. rng draws epochs and drives cuckoo
// evictions; it must not be shared with other goroutines.
func New(pool PoolID, cfg Config, rng *rand.Rand) (*Producer, error) {
	if err := pool.Validate(); err != nil {
		return nil, err
	}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	refs, err := filter.NewRefSet(cfg.Filter, rng)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	p := &Producer{
		cfg: cfg, pool: pool, rng: rng, refs: refs,
		owners: make(map[routing.Worker]map[routing.SeqHash]struct{}),
		feeds:  make(map[*Feed]struct{}),
	}
	p.startEpoch()
	return p, nil
}

// Pool returns the pool the producer publishes.
func (p *Producer) Pool() PoolID { return p.pool }

// startEpoch begins a new sequence space on the current summary: a fresh
// non-zero epoch different from the last one, seq 0, change tracking on.
func (p *Producer) startEpoch() {
	old := p.epoch
	for p.epoch == 0 || p.epoch == old {
		p.epoch = p.rng.Uint64()
	}
	p.seq = 0
	p.summary = p.refs.Summary()
	p.count = p.summary.Len()
	p.summary.TrackChanges()
	p.summary.TakeChanges()
}

// Run applies and publishes every batch src delivers until ctx ends, src
// fails or the producer is closed. A stale batch is skipped; any other
// error of Apply ends Run.
func (p *Producer) Run(ctx context.Context, src Source) error {
	for {
		b, err := src.Next(ctx)
		if err != nil {
			return err
		}
		err = p.Apply(b)
		if err != nil && !errors.Is(err, ErrStaleBatch) {
			return err
		}
	}
}

// Apply applies one batch and publishes the buckets it changed as one delta
// (no delta when no bucket changed). A replacing batch (Batch.Replace)
// applies only its difference from the held ownership. A batch with an invalid change or a
// stale index is refused whole. Filter capacity problems never fail a
// batch: the producer grows the filter, and rebuilds a Bloom filter whose
// removed blocks pass Config.BloomRebuildShare (bloom.go); either starts
// a new epoch.
func (p *Producer) Apply(b Batch) error {
	if err := b.validate(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if b.Index != 0 {
		if b.Index <= p.lastIndex {
			return fmt.Errorf("%w: index %d after %d", ErrStaleBatch, b.Index, p.lastIndex)
		}
		p.lastIndex = b.Index
	}
	if b.Replace {
		dropped, added := p.replaceAll(b.Changes)
		p.stats.Replaces++
		p.stats.ReplaceDropped += uint64(dropped)
		p.stats.ReplaceStored += uint64(added)
		p.stats.Events += uint64(dropped + added)
	} else {
		for _, c := range b.Changes {
			p.applyChange(c)
		}
		p.stats.Events += uint64(b.events())
	}
	if capacity, ok := p.needsRebuild(); ok {
		return p.rebuild(capacity)
	}
	p.publish()
	return nil
}

// needsRebuild reports whether the summary must be rebuilt before it is
// published, and at which capacity: a cuckoo summary that omits blocks or
// is too full grows to twice its size; a Bloom summary is rebuilt by
// bloomRebuild's rule.
func (p *Producer) needsRebuild() (capacity int, ok bool) {
	if p.summary.Kind() == filter.KindBloom {
		return p.bloomRebuild()
	}
	return 2 * max(p.refs.Capacity(), p.refs.Len()), p.refs.Omitted() > 0 || p.loadFactor() > p.cfg.GrowLoad
}

// loadFactor is the summary's load: a cuckoo filter's slot occupancy, or
// the entries a Bloom filter's bits hold, stale ones included, over the
// capacity it was sized for.
func (p *Producer) loadFactor() float64 {
	if c, ok := p.summary.(*filter.Cuckoo); ok {
		return c.LoadFactor()
	}
	return float64(p.refs.Len()+p.refs.Stale()) / float64(p.refs.Capacity())
}

// Rebuild replaces the summary by one sized for capacity (0 keeps the
// current one) holding every held block, and starts a new epoch: every
// feed ends with ErrProducerChanged.
func (p *Producer) Rebuild(capacity int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	return p.rebuild(capacity)
}

// rebuild is Rebuild with p.mu held.
func (p *Producer) rebuild(capacity int) error {
	if err := p.refs.Rebuild(capacity); err != nil {
		return fmt.Errorf("rebuild of pool %v: %w", p.pool, err)
	}
	p.stats.Rebuilds++
	p.startEpoch()
	p.endFeeds(ErrProducerChanged)
	return nil
}

// Close ends every feed with ErrClosed and refuses further calls.
func (p *Producer) Close() { p.close(ErrClosed) }

// Retire is Close for a producer that a new incarnation replaces: its
// feeds end with ErrProducerChanged, so subscribers resubscribe at once.
func (p *Producer) Retire() { p.close(ErrProducerChanged) }

// close refuses further calls and ends every feed with err.
func (p *Producer) close(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.endFeeds(err)
}

// Epoch returns the current epoch and the seq of the last delta.
func (p *Producer) Epoch() (epoch, seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epoch, p.seq
}

// MarshalBinary encodes the current summary, the image every subscriber
// converges to.
func (p *Producer) MarshalBinary() ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapshot()
}

// snapshot returns the cached encoding of the summary at (epoch, seq).
func (p *Producer) snapshot() ([]byte, error) {
	if p.snap.data != nil && p.snap.epoch == p.epoch && p.snap.seq == p.seq {
		return p.snap.data, nil
	}
	data, err := p.summary.MarshalBinary()
	if err != nil {
		return nil, err
	}
	p.snap = snapshotCache{epoch: p.epoch, seq: p.seq, data: data}
	return data, nil
}
