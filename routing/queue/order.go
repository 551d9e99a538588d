package queue

import (
	"fmt"
	"time"
)

// Order is how a class's heaps sort their requests.
type Order uint8

// The orders.
const (
	// FCFS serves the earliest adjusted arrival first (tail TTFT).
	FCFS Order = iota
	// WSPT serves the highest (1 + priority) / uncached tokens first (mean
	// TTFT).
	WSPT
)

// String is the order's configuration name.
func (o Order) String() string {
	if o == WSPT {
		return "wspt"
	}
	return "fcfs"
}

// ParseOrder reads an order's configuration name.
func ParseOrder(s string) (Order, error) {
	switch s {
	case "fcfs", "":
		return FCFS, nil
	case "wspt":
		return WSPT, nil
	}
	return FCFS, fmt.Errorf("%w: queue policy %q: want fcfs or wspt", ErrInvalid, s)
}

// Item is one queued request. The caller fills the exported fields before
// Push and must not change them while the item is queued.
type Item struct {
	// Class is the physical class's index in the Queue's configuration.
	Class int
	// Lane, when set, is the only worker that may take the request.
	Lane *Lane
	// Strict is the strict priority tier: a higher tier always goes first.
	Strict int
	// Jump is the priority: seconds of arrival credit under fcfs, a weight
	// under wspt. It must be finite and >= 0.
	Jump float64
	// Arrival is when the request arrived, on the caller's clock.
	Arrival time.Time
	// ISL is the prompt's length in tokens and Cached the best cached
	// prefix over the eligible workers, in tokens, at enqueue.
	ISL, Cached int
	// Value is the caller's; the queue does not read it.
	Value any

	cost  int64
	key   float64
	seq   uint64
	index int // position in its heap, -1 when not queued
	heap  *itemHeap
}

// Lane names the workers an item can go to by an opaque comparable key:
// an exact worker (the caller's worker identity), or a set of them. Each
// lane is ordered apart, so that an item whose workers are busy holds up
// no item of another lane.
type Lane struct{ Key any }

// Cost is the request's DRR cost, max(1, ISL - Cached), fixed at enqueue.
func (it *Item) Cost() int64 { return it.cost }

// Queued reports whether the item is in a queue.
func (it *Item) Queued() bool { return it.heap != nil }

// keyOf computes the heap key of it under o, relative to epoch.
func keyOf(o Order, it *Item, epoch time.Time) float64 {
	if o == WSPT {
		return (1 + it.Jump) / float64(it.cost)
	}
	return it.Jump - it.Arrival.Sub(epoch).Seconds()
}

// before reports whether a goes before b.
func before(a, b *Item) bool {
	if a.Strict != b.Strict {
		return a.Strict > b.Strict
	}
	if a.key != b.key {
		return a.key > b.key
	}
	return a.seq < b.seq
}
