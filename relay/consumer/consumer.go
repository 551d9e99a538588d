package consumer

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
)

// Consumer owns one lane per remote pool and answers prefix queries over
// the lanes of one cache domain. It is safe for concurrent use; Close stops
// and waits for every lane goroutine.
type Consumer struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // serialises lane-set writers
	lanes  atomic.Pointer[laneSet]
	added  uint64
}

// laneSet is an immutable view of the lanes, replaced on every change so
// that queries read it without a lock.
type laneSet struct {
	byDomain map[producer.Domain][]*laneEntry
}

// laneEntry is a lane and the cancel function of its goroutine.
type laneEntry struct {
	lane   *Lane
	cancel context.CancelFunc
}

// Result is one remote pool's answer to a prefix query.
type Result struct {
	Pool producer.PoolID
	// Ready is false until the lane's first snapshot; Depth is then 0.
	Ready bool
	// Depth is the longest prefix, in blocks, probably present.
	Depth int
	// Staleness is the time since the lane last heard from the pool.
	Staleness time.Duration
	// Load is the pool's load from its last heartbeat.
	Load producer.Load
}

// New returns a consumer without lanes.
func New(cfg Config) (*Consumer, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Consumer{cfg: cfg, ctx: ctx, cancel: cancel}
	c.lanes.Store(&laneSet{byDomain: map[producer.Domain][]*laneEntry{}})
	return c, nil
}

// AddLane starts mirroring pool through client (a kvrpb.RelayClient on a
// connection the caller dialled, with its TLS choice, and closes after
// Close).
func (c *Consumer) AddLane(pool producer.PoolID, client kvrpb.RelayClient) (*Lane, error) {
	if err := pool.Validate(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return nil, ErrClosed
	}
	old := c.lanes.Load()
	for _, e := range old.byDomain[pool.Domain] {
		if e.lane.pool == pool {
			return nil, fmt.Errorf("%w: %v", ErrDuplicateLane, pool)
		}
	}
	l := &Lane{pool: pool, client: client, cfg: &c.cfg, rng: rand.New(rand.NewPCG(c.cfg.Seed+c.added, 0x1a4e))}
	c.added++
	ctx, cancel := context.WithCancel(c.ctx)
	c.lanes.Store(old.with(&laneEntry{lane: l, cancel: cancel}))
	c.wg.Go(func() { l.run(ctx) })
	return l, nil
}

// RemoveLane stops mirroring pool; queries stop seeing it at once. Its
// goroutine exits on its own; Close waits for it.
func (c *Consumer) RemoveLane(pool producer.PoolID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.lanes.Load()
	next := &laneSet{byDomain: maps(old.byDomain)}
	next.byDomain[pool.Domain] = slices.DeleteFunc(slices.Clone(old.byDomain[pool.Domain]), func(e *laneEntry) bool {
		if e.lane.pool == pool {
			e.cancel()
			return true
		}
		return false
	})
	c.lanes.Store(next)
}

// Close stops every lane and waits for their goroutines.
func (c *Consumer) Close() {
	// Cancelling under mu orders Close after any AddLane in progress, so
	// no lane goroutine starts after Wait begins.
	c.mu.Lock()
	c.cancel()
	c.mu.Unlock()
	c.wg.Wait()
}

// Query returns, appended to dst, one Result per lane of domain (sorted by
// DC): the longest prefix of hs each remote pool probably holds. hs are the
// request's block hashes in that domain's hashing; now measures staleness.
// The domain's lanes share one read-write lock, which the query holds for
// reading while it searches them one after the other (see the package doc
// for why one lock per domain and not per lane).
func (c *Consumer) Query(dst []Result, domain producer.Domain, hs []routing.SeqHash, now time.Time) []Result {
	es := c.lanes.Load().byDomain[domain]
	if len(es) == 0 {
		return dst
	}
	mu := es[0].lane.mu
	mu.RLock()
	for _, e := range es {
		dst = append(dst, e.lane.query(hs, c.cfg.VerifyWindow, now))
	}
	mu.RUnlock()
	return dst
}

// Lanes returns the status of every lane at now, sorted by pool.
func (c *Consumer) Lanes(now time.Time) []LaneStatus {
	var out []LaneStatus
	for _, es := range c.lanes.Load().byDomain {
		for _, e := range es {
			out = append(out, e.lane.Status(now))
		}
	}
	slices.SortFunc(out, func(a, b LaneStatus) int { return cmp.Compare(a.Pool.String(), b.Pool.String()) })
	return out
}

// with returns a copy of s with e added, keeping each domain's lanes
// sorted by DC and giving e's lane its domain's lock (a new one for the
// domain's first lane). It runs before the lane's goroutine starts.
func (s *laneSet) with(e *laneEntry) *laneSet {
	next := &laneSet{byDomain: maps(s.byDomain)}
	d := e.lane.pool.Domain
	if es := s.byDomain[d]; len(es) > 0 {
		e.lane.mu = es[0].lane.mu
	} else {
		e.lane.mu = new(sync.RWMutex)
	}
	es := append(slices.Clone(s.byDomain[d]), e)
	slices.SortFunc(es, func(a, b *laneEntry) int { return cmp.Compare(a.lane.pool.DC, b.lane.pool.DC) })
	next.byDomain[d] = es
	return next
}

// maps copies a domain map (the slices are shared until replaced).
func maps(m map[producer.Domain][]*laneEntry) map[producer.Domain][]*laneEntry {
	out := make(map[producer.Domain][]*laneEntry, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
