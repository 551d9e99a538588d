package mocker

// Cancel aborts request id, as an engine does when its client goes away:
// a waiting request leaves the queue at once; a running one stops at the
// end of the iteration in flight (whose work is already spent, and whose
// computed prompt blocks stay cached) or at once when the engine is
// between iterations. Its blocks are released, it produces no further
// token and never appears in StepResult.Finished. Cancel reports whether
// the request was in the engine (not yet finished nor cancelled).
func (e *Engine) Cancel(id string) bool {
	if _, ok := e.active[id]; !ok {
		return false
	}
	delete(e.active, id)
	if e.waiting.remove(id) || e.cancelTransfer(id) {
		e.stalled = false
		return true
	}
	for _, s := range e.running {
		if s.id != id {
			continue
		}
		s.canceled = true
		if !e.busy {
			e.dropCanceled()
		}
		return true
	}
	return true
}

// dropCanceled releases the blocks of every cancelled running request and
// removes it from the running list. complete calls it at the end of each
// iteration.
func (e *Engine) dropCanceled() {
	dropped := false
	for _, s := range e.running {
		if s.canceled && s.held >= 0 {
			e.cache.release(s.refs, s.anon())
			s.refs, s.held = nil, -1
			dropped = true
		}
	}
	if dropped {
		e.dropFinished()
		e.stalled = false
	}
}

// remove takes request id out of the queue and reports whether it was
// there. Cancellation is rare next to scheduling, so a linear scan is
// fine.
func (q *queue) remove(id string) bool {
	for i := q.head; i < len(q.items); i++ {
		if q.items[i].id != id {
			continue
		}
		copy(q.items[i:], q.items[i+1:])
		q.items[len(q.items)-1] = nil
		q.items = q.items[:len(q.items)-1]
		if q.head == len(q.items) {
			q.items, q.head = q.items[:0], 0
		}
		return true
	}
	return false
}
