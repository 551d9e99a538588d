package queue

import (
	"fmt"
	"math"
	"time"
)

// Config configures a Queue.
type Config struct {
	// Order sorts every class's heaps.
	Order Order
	// Classes are the physical classes, in ring order; at least one.
	Classes []ClassConfig
	// Epoch is the origin of fcfs arrival offsets; any fixed time.
	Epoch time.Time
}

// Queue is the policy-class queue; see the package documentation.
type Queue struct {
	cfg     Config
	classes []*class
	cursor  int
	// visited is set while the class at the cursor has had its quantum
	// for this visit.
	visited bool
	seq     uint64
	len     int
}

// New builds a Queue.
func New(cfg Config) (*Queue, error) {
	if len(cfg.Classes) == 0 {
		return nil, fmt.Errorf("%w: at least one class is required", ErrInvalid)
	}
	q := &Queue{cfg: cfg}
	seen := make(map[string]bool, len(cfg.Classes))
	for _, cc := range cfg.Classes {
		if err := cc.validate(); err != nil {
			return nil, err
		}
		if seen[cc.Name] {
			return nil, fmt.Errorf("%w: class %q defined twice", ErrInvalid, cc.Name)
		}
		seen[cc.Name] = true
		q.classes = append(q.classes, newClass(cc))
	}
	return q, nil
}

// Len is the number of queued items.
func (q *Queue) Len() int { return q.len }

// Backlogged reports whether class c has queued items: a new arrival of
// that class may not bypass them and must queue too.
func (q *Queue) Backlogged(c int) bool {
	return c >= 0 && c < len(q.classes) && q.classes[c].stats.Pending > 0
}

// Push queues it, after checking its class's limits scaled by workers.
// A refusal by a limit is a *LimitError.
func (q *Queue) Push(it *Item, workers int) error {
	if err := q.check(it); err != nil {
		return err
	}
	c := q.classes[it.Class]
	if err := c.admit(workers); err != nil {
		return err
	}
	it.cost = max(1, int64(it.ISL)-int64(it.Cached))
	it.key = keyOf(q.cfg.Order, it, q.cfg.Epoch)
	q.seq++
	it.seq = q.seq
	q.insert(c, it)
	return nil
}

// check refuses items the queue cannot order.
func (q *Queue) check(it *Item) error {
	switch {
	case it == nil:
		return fmt.Errorf("%w: nil item", ErrInvalid)
	case it.Queued():
		return fmt.Errorf("%w: item already queued", ErrInvalid)
	case it.Class < 0 || it.Class >= len(q.classes):
		return fmt.Errorf("%w: class index %d of %d", ErrInvalid, it.Class, len(q.classes))
	case !(it.Jump >= 0) || math.IsInf(it.Jump, 1):
		return fmt.Errorf("%w: priority must be finite and >= 0, got %v", ErrInvalid, it.Jump)
	case it.ISL < 0 || it.Cached < 0:
		return fmt.Errorf("%w: negative token counts", ErrInvalid)
	}
	return nil
}

// insert adds it to its heap and the counters.
func (q *Queue) insert(c *class, it *Item) {
	c.heapFor(it).add(it)
	c.count(it, 1)
	q.len++
}

// Remove takes a queued item out at once (its client left); it reports
// whether the item was queued.
func (q *Queue) Remove(it *Item) bool {
	if it == nil || !it.Queued() {
		return false
	}
	c := q.classes[it.Class]
	c.take(it)
	c.stats.Removed++
	q.len--
	return true
}

// Requeue puts back an item that Next returned but could not be
// dispatched after all (the worker filled up in between), refunding its
// cost to its class. It keeps its place: its key and sequence are
// unchanged.
func (q *Queue) Requeue(it *Item) error {
	if it == nil || it.Queued() || it.Class < 0 || it.Class >= len(q.classes) || it.seq == 0 {
		return fmt.Errorf("%w: item was not dequeued by Next", ErrInvalid)
	}
	c := q.classes[it.Class]
	c.deficit += it.cost
	c.stats.Dispatched--
	c.stats.Served -= it.cost
	q.insert(c, it)
	return nil
}

// Stats returns class c's counters.
func (q *Queue) Stats(c int) Stats {
	if c < 0 || c >= len(q.classes) {
		return Stats{}
	}
	return q.classes[c].stats
}

// ClassName returns class c's name.
func (q *Queue) ClassName(c int) string {
	if c < 0 || c >= len(q.classes) {
		return ""
	}
	return q.classes[c].cfg.Name
}

// NumClasses is the number of physical classes.
func (q *Queue) NumClasses() int { return len(q.classes) }
