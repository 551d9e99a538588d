package queue

import "fmt"

// DefaultQuantum is the DRR quantum of a class that sets none: 512
// tokens, the reference's example weight unit, so that quanta of 512 and
// 128 give a 4:1 share.
const DefaultQuantum = 512

// ClassConfig is one physical class as the queue sees it.
type ClassConfig struct {
	// Name names the class in errors and metrics.
	Name string
	// Quantum is the credit, in uncached prompt tokens, the class earns per
	// DRR visit; its share of dispatch under contention is proportional
	// to it. Default DefaultQuantum.
	Quantum int64
	// Per-worker queue limits; 0 is unlimited. See LimitError.
	RequestsPerWorker, RawISLTokensPerWorker, CachedTokensPerWorker int64
}

// validate checks one class, naming its key.
func (c ClassConfig) validate() error {
	switch {
	case c.Name == "":
		return fmt.Errorf("%w: class name is required", ErrInvalid)
	case c.Quantum < 0:
		return fmt.Errorf("%w: class %q: quantum must be > 0, got %d", ErrInvalid, c.Name, c.Quantum)
	case c.RequestsPerWorker < 0 || c.RawISLTokensPerWorker < 0 || c.CachedTokensPerWorker < 0:
		return fmt.Errorf("%w: class %q: queue limits must be >= 0", ErrInvalid, c.Name)
	}
	return nil
}

// Stats are a class's counters.
type Stats struct {
	// Pending requests, and their raw ISL and cached tokens.
	Pending, PendingISL, PendingCached int64
	// Dispatched counts requests that left by Next, and Served their DRR
	// cost; Rejected counts refusals by a limit, Removed cancellations.
	Dispatched, Served, Rejected, Removed int64
}

// class is one physical class's queue state.
type class struct {
	cfg     ClassConfig
	shared  itemHeap
	lanes   map[any]*itemHeap
	deficit int64
	stats   Stats
}

func newClass(cfg ClassConfig) *class {
	if cfg.Quantum == 0 {
		cfg.Quantum = DefaultQuantum
	}
	return &class{cfg: cfg, lanes: make(map[any]*itemHeap)}
}

// heapFor returns the heap an item goes to, creating its lane.
func (c *class) heapFor(it *Item) *itemHeap {
	if it.Lane == nil {
		return &c.shared
	}
	h := c.lanes[it.Lane.Key]
	if h == nil {
		h = &itemHeap{lane: it.Lane}
		c.lanes[it.Lane.Key] = h
	}
	return h
}

// admit checks the limits before adding, scaled by workers.
func (c *class) admit(workers int) error {
	w := int64(max(workers, 0))
	check := func(l Limit, per, pending int64) error {
		if per > 0 && pending >= per*w {
			c.stats.Rejected++
			return &LimitError{Class: c.cfg.Name, Limit: l, PerWorker: per, Effective: per * w, Workers: workers, Pending: pending}
		}
		return nil
	}
	if err := check(LimitRequests, c.cfg.RequestsPerWorker, c.stats.Pending); err != nil {
		return err
	}
	if err := check(LimitRawISLTokens, c.cfg.RawISLTokensPerWorker, c.stats.PendingISL); err != nil {
		return err
	}
	return check(LimitCachedTokens, c.cfg.CachedTokensPerWorker, c.stats.PendingCached)
}

// count adds (sign 1) or subtracts (sign -1) an item from the pending
// counters.
func (c *class) count(it *Item, sign int64) {
	c.stats.Pending += sign
	c.stats.PendingISL += sign * int64(it.ISL)
	c.stats.PendingCached += sign * int64(it.Cached)
}

// candidate is the best ready item of the class: the shared head when
// ready(head) holds, against the ready lane heads. nil when none is.
func (c *class) candidate(ready func(*Item) bool) *Item {
	var best *Item
	if h := c.shared.head(); h != nil && ready(h) {
		best = h
	}
	for _, l := range c.lanes {
		if h := l.head(); h != nil && (best == nil || before(h, best)) && ready(h) {
			best = h
		}
	}
	return best
}

// take removes it from its heap and the counters; an emptied lane is
// dropped so that lanes of departed workers do not accumulate.
func (c *class) take(it *Item) {
	h := it.heap
	h.remove(it)
	c.count(it, -1)
	if h.lane != nil && h.Len() == 0 {
		delete(c.lanes, h.lane.Key)
	}
}
