package queue

import "container/heap"

// itemHeap is one ordered heap of items (a class's shared heap or one of
// its lanes).
type itemHeap struct {
	items []*Item
	lane  *Lane
}

var _ heap.Interface = (*itemHeap)(nil)

func (h *itemHeap) Len() int           { return len(h.items) }
func (h *itemHeap) Less(i, j int) bool { return before(h.items[i], h.items[j]) }
func (h *itemHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index, h.items[j].index = i, j
}

// Push implements heap.Interface; use add.
func (h *itemHeap) Push(x any) {
	it := x.(*Item)
	it.index, it.heap = len(h.items), h
	h.items = append(h.items, it)
}

// Pop implements heap.Interface; use remove.
func (h *itemHeap) Pop() any {
	n := len(h.items) - 1
	it := h.items[n]
	h.items[n], h.items = nil, h.items[:n]
	it.index, it.heap = -1, nil
	return it
}

// head is the first item, nil when empty.
func (h *itemHeap) head() *Item {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

func (h *itemHeap) add(it *Item) { heap.Push(h, it) }

func (h *itemHeap) remove(it *Item) { heap.Remove(h, it.index) }
