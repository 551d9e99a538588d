package index

import (
	"container/heap"
	"fmt"
	"math"
	"slices"

	"github.com/kvrouter/kvrouter/routing"
)

// lruEntry is one block of one worker under the LRU policy. idx is its
// place in the worker's evictable heap, or -1 while it is referenced.
type lruEntry struct {
	seq   routing.SeqHash
	refs  int32
	pos   int32
	epoch uint64
	idx   int
}

// lease is what Release needs to unreference a request's blocks.
type lease struct {
	slot   uint32
	gen    uint64
	hashes []routing.SeqHash
}

// lruHeap orders a worker's unreferenced blocks least recently released
// first and, within one release, deeper positions first, so that a shared
// prefix outlives the tails that hang off it.
type lruHeap []*lruEntry

func (h lruHeap) Len() int { return len(h) }
func (h lruHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	switch {
	case a.epoch != b.epoch:
		return a.epoch < b.epoch
	case a.pos != b.pos:
		return a.pos > b.pos
	}
	return a.seq < b.seq
}
func (h lruHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *lruHeap) Push(x any) {
	e := x.(*lruEntry)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *lruHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.idx = -1
	return e
}

// SetWorker declares a worker and its device capacity in blocks
// (info.TotalBlocks), which the LRU policy keeps it within. Shrinking the
// capacity evicts at once. Under the TTL policy it only registers the
// worker.
func (a *Approx) SetWorker(info routing.WorkerInfo) error {
	if a.cfg.Policy == PolicyLRU && info.TotalBlocks <= 0 {
		return fmt.Errorf("%w: WorkerInfo.TotalBlocks: must be positive, got %d", ErrConfig, info.TotalBlocks)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	slot, err := a.intern(info.Worker)
	if err != nil {
		return err
	}
	ws := &a.workers[slot]
	ws.capacity = info.TotalBlocks
	a.evict(slot)
	return nil
}

// recordLRU references the request's blocks on w and evicts down to the
// capacity among unreferenced blocks.
func (a *Approx) recordLRU(w routing.Worker, hashes []routing.SeqHash) (Lease, error) {
	slot, ok := a.slots[w]
	if !ok {
		return 0, fmt.Errorf("%w: %v (declare it with SetWorker)", ErrUnknownWorker, w)
	}
	ws := &a.workers[slot]
	if ws.lru == nil {
		ws.lru = make(map[routing.SeqHash]*lruEntry)
	}
	for i, h := range hashes {
		e := ws.lru[h]
		if e == nil {
			e = &lruEntry{seq: h, pos: int32(i), idx: -1}
			ws.lru[h] = e
			a.upsert(h, slot, int32(i), math.MaxInt64)
		}
		if e.idx >= 0 {
			heap.Remove(&ws.evictable, e.idx)
		}
		e.refs++
	}
	a.next++
	a.leases[a.next] = lease{slot: slot, gen: ws.gen, hashes: slices.Clone(hashes)}
	a.evict(slot)
	return a.next, nil
}

// Release ends a lease: its blocks become evictable once no other active
// request references them, as one release epoch. Under the TTL policy the
// zero lease is accepted and does nothing.
func (a *Approx) Release(l Lease) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cfg.Policy == PolicyTTL && l == 0 {
		return nil
	}
	ls, ok := a.leases[l]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownLease, l)
	}
	delete(a.leases, l)
	ws := &a.workers[ls.slot]
	if ws.gen != ls.gen {
		return nil
	}
	a.epoch++
	for _, h := range ls.hashes {
		e := ws.lru[h]
		if e == nil || e.refs == 0 {
			continue
		}
		if e.refs--; e.refs == 0 {
			e.epoch = a.epoch
			heap.Push(&ws.evictable, e)
		}
	}
	a.evict(ls.slot)
	return nil
}

// evict drops the worker's least-recently-released unreferenced blocks
// while it is over capacity. Referenced blocks are never evicted, so a
// worker whose active requests exceed its capacity stays over it.
func (a *Approx) evict(slot uint32) {
	ws := &a.workers[slot]
	for ws.capacity > 0 && ws.held > ws.capacity && len(ws.evictable) > 0 {
		e := heap.Pop(&ws.evictable).(*lruEntry)
		delete(ws.lru, e.seq)
		a.drop(e.seq, slot)
		a.stats.evicted++
	}
}
