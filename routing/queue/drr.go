package queue

// Next removes and returns the next item to dispatch by deficit round
// robin (see the package documentation), or nil when no class has a
// ready candidate. ready reports whether some worker can take an item now
// (for a lane item: its worker); it must not change the queue.
func (q *Queue) Next(ready func(*Item) bool) *Item {
	if q.len == 0 {
		return nil
	}
	for round := 0; round < 2; round++ {
		if it := q.ring(ready); it != nil {
			return it
		}
		if !q.virtualRounds(ready) {
			return nil
		}
	}
	return nil
}

// ring visits every class once from the cursor and dispatches the first
// affordable candidate.
func (q *Queue) ring(ready func(*Item) bool) *Item {
	for range len(q.classes) {
		c := q.classes[q.cursor]
		if c.stats.Pending == 0 {
			c.deficit = 0
			q.advance()
			continue
		}
		it := c.candidate(ready)
		if it == nil {
			q.advance()
			continue
		}
		if c.deficit < it.cost && !q.visited {
			c.deficit += c.cfg.Quantum
			q.visited = true
		}
		if c.deficit >= it.cost {
			q.dispatch(c, it)
			return it
		}
		q.advance()
	}
	return nil
}

// virtualRounds credits every ready class with the fewest whole rounds of
// quanta after which one of them can afford its candidate, instead of
// looping through those rounds. It reports whether any class is ready.
func (q *Queue) virtualRounds(ready func(*Item) bool) bool {
	k := int64(-1)
	for _, c := range q.classes {
		if it := c.candidate(ready); it != nil {
			need := (it.cost - c.deficit + c.cfg.Quantum - 1) / c.cfg.Quantum
			if k < 0 || need < k {
				k = need
			}
		}
	}
	if k < 0 {
		return false
	}
	for _, c := range q.classes {
		if c.candidate(ready) != nil {
			c.deficit += k * c.cfg.Quantum
		}
	}
	return true
}

// dispatch takes it out and charges its class; the cursor stays, so the
// class keeps dispatching while its deficit covers its next head.
func (q *Queue) dispatch(c *class, it *Item) {
	c.take(it)
	c.deficit -= it.cost
	c.stats.Dispatched++
	c.stats.Served += it.cost
	q.len--
	if c.stats.Pending == 0 {
		c.deficit = 0
		q.advance()
	}
}

// advance moves the cursor to the next class; the next class has not had
// its quantum yet.
func (q *Queue) advance() {
	q.cursor = (q.cursor + 1) % len(q.classes)
	q.visited = false
}
