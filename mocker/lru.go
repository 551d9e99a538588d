package mocker

// lruList is an intrusive doubly linked list of unreferenced cached blocks,
// least recently released at the front. Intrusive links make every operation
// O(1) without allocation, which matters because a long prompt releases
// thousands of blocks at once.
type lruList struct {
	head, tail *block
	n          int
}

func (l *lruList) pushBack(b *block) {
	b.prev, b.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = b
	} else {
		l.head = b
	}
	l.tail = b
	l.n++
}

func (l *lruList) remove(b *block) {
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		l.head = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	} else {
		l.tail = b.prev
	}
	b.prev, b.next = nil, nil
	l.n--
}

// popFront removes and returns the least recently used block; the caller
// checks that the list is not empty.
func (l *lruList) popFront() *block {
	b := l.head
	l.remove(b)
	return b
}
