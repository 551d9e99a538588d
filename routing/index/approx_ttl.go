package index

import (
	"container/heap"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// ttlItem is one expiry of one (worker, block) entry. Refreshing an entry
// pushes a new item; the old one is recognized as stale when popped
// because the entry's expiry no longer matches.
type ttlItem struct {
	exp  int64
	pos  int32
	slot uint32
	seq  routing.SeqHash
}

// ttlHeap orders items soonest expiry first, then deeper positions first
// (a deeper block is worth less without its prefix), then by slot and hash
// so that the order is total and pruning is deterministic.
type ttlHeap []ttlItem

func (h ttlHeap) Len() int { return len(h) }
func (h ttlHeap) Less(i, j int) bool {
	a, b := &h[i], &h[j]
	switch {
	case a.exp != b.exp:
		return a.exp < b.exp
	case a.pos != b.pos:
		return a.pos > b.pos
	case a.slot != b.slot:
		return a.slot < b.slot
	}
	return a.seq < b.seq
}
func (h ttlHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *ttlHeap) Push(x any)   { *h = append(*h, x.(ttlItem)) }
func (h *ttlHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// recordTTL refreshes the request's blocks for slot, then expires and
// prunes.
func (a *Approx) recordTTL(slot uint32, hashes []routing.SeqHash, now int64) {
	exp := now + int64(a.cfg.TTL)
	for i, h := range hashes {
		a.upsert(h, slot, int32(i), exp)
		heap.Push(&a.ttl, ttlItem{exp: exp, pos: int32(i), slot: slot, seq: h})
	}
	a.expire(now)
	a.prune()
	a.compact()
}

// Prune drops the entries expired at now. Record prunes as it goes; Prune
// lets an idle index release memory.
func (a *Approx) Prune(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expire(now.UnixNano())
	a.compact()
}

// expire drops every entry whose expiry is at or before now.
func (a *Approx) expire(now int64) {
	for len(a.ttl) > 0 && a.ttl[0].exp <= now {
		if a.popLive() {
			a.stats.expired++
		}
	}
}

// prune shrinks the index to PruneTarget of MaxBlocks when it is over
// MaxBlocks, soonest-expiring entries first.
func (a *Approx) prune() {
	if a.pairs <= a.cfg.MaxBlocks {
		return
	}
	target := int(float64(a.cfg.MaxBlocks) * a.cfg.PruneTarget)
	for a.pairs > target && len(a.ttl) > 0 {
		if a.popLive() {
			a.stats.pruned++
		}
	}
}

// popLive pops the first item and drops its entry if the item is current.
func (a *Approx) popLive() bool {
	it := heap.Pop(&a.ttl).(ttlItem)
	o := a.owner(it.seq, it.slot)
	if o == nil || o.exp != it.exp {
		return false
	}
	a.drop(it.seq, it.slot)
	return true
}

// compact rebuilds the heap from the live entries once stale items
// outnumber them, bounding the heap at about twice the entries.
func (a *Approx) compact() {
	if len(a.ttl) <= 2*a.pairs+1024 {
		return
	}
	h := a.ttl[:0]
	for seq, os := range a.blocks {
		for _, o := range os {
			h = append(h, ttlItem{exp: o.exp, pos: o.pos, slot: o.slot, seq: seq})
		}
	}
	a.ttl = h
	heap.Init(&a.ttl)
}
