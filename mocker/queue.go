package mocker

// queue is the FCFS waiting queue: a slice with a moving head, so that
// popping the front is O(1) and pushing a preempted request back to the
// front reuses the slot just vacated in the common case.
type queue struct {
	items []*seq
	head  int
}

func (q *queue) len() int { return len(q.items) - q.head }

func (q *queue) front() *seq {
	if q.head == len(q.items) {
		return nil
	}
	return q.items[q.head]
}

func (q *queue) popFront() *seq {
	s := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return s
}

func (q *queue) pushBack(s *seq) {
	if q.head > 0 && q.head >= len(q.items)/2 {
		// Compact so the backing array does not grow without bound.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, s)
}

func (q *queue) pushFront(s *seq) {
	if q.head > 0 {
		q.head--
		q.items[q.head] = s
		return
	}
	q.items = append(q.items, nil)
	copy(q.items[1:], q.items)
	q.items[0] = s
}

// each calls f on every queued request, front first.
func (q *queue) each(f func(*seq)) {
	for _, s := range q.items[q.head:] {
		f(s)
	}
}
