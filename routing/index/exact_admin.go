package index

import (
	"fmt"
	"slices"

	"github.com/kvrouter/kvrouter/routing"
)

// ReplaceWorker replaces w's whole state with a snapshot: the worker is
// cleared, the events are applied in order with their ids ignored, and the
// cursor is set to cursor (the id of the last event the snapshot covers).
// Readers see the old state or the new one, never a mix. Every event must
// be well formed and name w, or nothing changes. A stored event whose
// parent is unknown within the snapshot is skipped and the rest applies;
// the returned error then wraps ErrUnknownParent with the count.
func (e *Exact) ReplaceWorker(w routing.Worker, events []routing.Event, cursor uint64) error {
	for i := range events {
		ev := &events[i]
		if err := ev.Validate(); err != nil {
			return fmt.Errorf("snapshot event %d: %w", i, err)
		}
		if ev.Worker != w {
			return fmt.Errorf("%w: snapshot event %d names worker %v, not %v", routing.ErrBadEvent, i, ev.Worker, w)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	slot, err := e.intern(w)
	if err != nil {
		return err
	}
	e.clearWorker(slot)
	skipped := 0
	for i := range events {
		if e.applyBody(slot, &events[i]) != nil {
			skipped++
		}
	}
	e.workers[slot].cursor = cursor
	if skipped > 0 {
		return fmt.Errorf("%w: %d snapshot events of worker %v skipped", ErrUnknownParent, skipped, w)
	}
	return nil
}

// RemoveWorker drops everything the index knows of w, cursor included, and
// reports whether it knew w.
func (e *Exact) RemoveWorker(w routing.Worker) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.removeLocked(w)
}

// RemoveEngine removes every rank of the engine and returns how many ranks
// the index knew.
func (e *Exact) RemoveEngine(id routing.WorkerID) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ranks []routing.Worker
	for w := range e.slots {
		if w.ID == id {
			ranks = append(ranks, w)
		}
	}
	for _, w := range ranks {
		e.removeLocked(w)
	}
	return len(ranks)
}

// removeLocked is RemoveWorker with the lock held.
func (e *Exact) removeLocked(w routing.Worker) bool {
	slot, ok := e.slots[w]
	if !ok {
		return false
	}
	e.clearWorker(slot)
	e.workers[slot] = workerState{}
	delete(e.slots, w)
	e.free = append(e.free, slot)
	return true
}

// Workers returns the workers the index has state for, sorted.
func (e *Exact) Workers() []routing.Worker {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]routing.Worker, 0, len(e.slots))
	for w := range e.slots {
		out = append(out, w)
	}
	slices.SortFunc(out, routing.Worker.Compare)
	return out
}
