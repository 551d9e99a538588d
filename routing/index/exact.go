package index

import (
	"errors"
	"fmt"
	"sync"

	"github.com/kvrouter/kvrouter/routing"
)

// Exact is the exact prefix index: which worker holds which sequence-hash
// block on which tier, built from the workers' KV events. The zero value is
// not usable; call NewExact.
//
// All methods are safe for concurrent use. Writers (Apply, ReplaceWorker,
// RemoveWorker, RemoveEngine) serialize on a mutex and exclude readers for
// the duration of one event; readers (FindMatches, Cursor, Stats) share it.
// The intended shape is one event-applying goroutine and many routing
// goroutines.
type Exact struct {
	mu     sync.RWMutex
	blocks table[owners]
	lists  ownerLists
	slots  map[routing.Worker]uint32
	// workers is indexed by slot; slots of removed workers are reused.
	workers []workerState
	free    []uint32
	pairs   int
	// sharedPairs counts the (worker, block) pairs on the shared tier,
	// so that a query can skip the shared lookups when there are none.
	sharedPairs int
	stats       counters
	scratch     sync.Pool
	// seqBuf and sink are the writer's scratch; only touched under mu.
	seqBuf []routing.SeqHash
	sink   uint64
}

// workerState is one worker's cursor and engine-id map.
type workerState struct {
	w      routing.Worker
	cursor uint64
	// engines maps the engine's block ids to sequence hashes. An entry
	// lives while the worker holds the block on some tier, so removals
	// (which carry engine ids only) resolve, and clearing the worker
	// finds every block it holds.
	engines table[routing.SeqHash]
}

// counters are the event outcomes that Stats reports.
type counters struct {
	unknownRemovals uint64
	unknownParents  uint64
	stale           uint64
	gaps            uint64
	restarts        uint64
}

// ExactStats is a snapshot of the index's size and event outcomes.
type ExactStats struct {
	// Blocks is the number of distinct sequence hashes held by any worker.
	Blocks int
	// Pairs is the number of (worker, block) pairs, each counted once
	// whatever its tiers.
	Pairs int
	// Workers is the number of workers with state (held blocks or cursor).
	Workers int
	// SharedPairs is the number of (worker, block) pairs on the shared
	// tier: 0 when no engine reports one.
	SharedPairs int
	// UnknownRemovals counts removed engine ids that did not resolve to a
	// block held on the event's tier.
	UnknownRemovals uint64
	// UnknownParents counts stored events dropped for an unknown parent.
	UnknownParents uint64
	// Stale, Gaps and Restarts count events by cursor outcome.
	Stale    uint64
	Gaps     uint64
	Restarts uint64
}

// NewExact returns an empty exact index.
func NewExact() *Exact {
	return &Exact{slots: make(map[routing.Worker]uint32)}
}

// Apply applies one KV event in event-id order (CheckNext). It returns nil
// when the event was applied; an error wrapping routing.ErrBadEvent for a
// malformed event (nothing applied); ErrStale for a duplicate (ignored);
// ErrGap when events are missing (nothing applied, the cursor stays:
// resync the worker with ReplaceWorker); ErrUnknownParent when a stored
// event's parent is not known (its blocks are not placed but its id is
// consumed, as the engine will not send it again). An engine restart
// clears the worker before the event applies.
func (e *Exact) Apply(ev *routing.Event) error {
	if err := validateEvent(ev); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var cursor uint64
	slot, known := e.slots[ev.Worker]
	if known {
		cursor = e.workers[slot].cursor
	}
	restart, err := CheckNext(ev, cursor)
	switch {
	case errors.Is(err, ErrStale):
		e.stats.stale++
		return err
	case err != nil:
		e.stats.gaps++
		return err
	case !known:
		if slot, err = e.intern(ev.Worker); err != nil {
			return err
		}
	}
	return e.applyAt(slot, ev, restart)
}

// ApplyAdmitted applies an event that its caller's cursor admitted with
// CheckNext (restart as CheckNext returned it), and sets the worker's
// cursor to the event's id. It is Apply for an owner that keeps the
// authoritative cursor itself (the raft FSM, whose tables hold it): the
// rule is applied once, by that owner, and the index follows. Its errors
// are Apply's other than ErrStale and ErrGap, plus ErrTooManyWorkers.
func (e *Exact) ApplyAdmitted(ev *routing.Event, restart bool) error {
	if err := validateEvent(ev); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	slot, err := e.intern(ev.Worker)
	if err != nil {
		return err
	}
	return e.applyAt(slot, ev, restart)
}

// applyAt applies an admitted event to the worker in slot. Callers hold
// the lock.
func (e *Exact) applyAt(slot uint32, ev *routing.Event, restart bool) error {
	if restart {
		e.clearWorker(slot)
		e.stats.restarts++
	}
	e.workers[slot].cursor = ev.ID
	return e.applyBody(slot, ev)
}

// validateEvent checks an event's shape and id before any lock is taken.
func validateEvent(ev *routing.Event) error {
	if ev == nil {
		return fmt.Errorf("%w: nil event", routing.ErrBadEvent)
	}
	if err := ev.Validate(); err != nil {
		return err
	}
	if ev.ID == 0 {
		return fmt.Errorf("%w: event id 0 (ids start at 1)", routing.ErrBadEvent)
	}
	return nil
}

// intern returns the worker's slot, creating it when needed.
func (e *Exact) intern(w routing.Worker) (uint32, error) {
	if slot, ok := e.slots[w]; ok {
		return slot, nil
	}
	var slot uint32
	if n := len(e.free); n > 0 {
		slot = e.free[n-1]
		e.free = e.free[:n-1]
	} else {
		if len(e.workers) >= maxSlots {
			return 0, fmt.Errorf("%w: %d", ErrTooManyWorkers, len(e.workers))
		}
		slot = uint32(len(e.workers))
		e.workers = append(e.workers, workerState{})
	}
	e.workers[slot] = workerState{w: w}
	e.slots[w] = slot
	return slot, nil
}

// Cursor returns the id of the last event applied for w, and whether the
// index has any state for w.
func (e *Exact) Cursor(w routing.Worker) (uint64, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	slot, ok := e.slots[w]
	if !ok {
		return 0, false
	}
	return e.workers[slot].cursor, true
}

// Stats returns the index's size and event counters.
func (e *Exact) Stats() ExactStats {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return ExactStats{
		Blocks:          e.blocks.len(),
		Pairs:           e.pairs,
		Workers:         len(e.slots),
		SharedPairs:     e.sharedPairs,
		UnknownRemovals: e.stats.unknownRemovals,
		UnknownParents:  e.stats.unknownParents,
		Stale:           e.stats.stale,
		Gaps:            e.stats.gaps,
		Restarts:        e.stats.restarts,
	}
}
