package sim

import (
	"container/heap"
	"container/list"
	"math"
	"slices"

	"github.com/kvrouter/kvrouter/routing"
)

// References are the hit ratios a policy is measured against, each with the
// hits it gives every prompt (in blocks) for the per-decision breakdown.
type References struct {
	// Infinite is the infinite-cache bound (InfiniteCacheBound).
	Infinite float64
	// Pooled is the hit ratio of one LRU cache holding the whole fleet's
	// capacity (PooledLRU); PooledHits its hits per prompt.
	Pooled     float64
	PooledHits []int32
	// Oracle is the hit ratio of the clairvoyant placement (Oracle).
	Oracle float64
}

// NewReferences computes the three references of a workload for a fleet
// of engines engines of capacity blocks each, at the block size the prompts
// were hashed with.
func NewReferences(prompts []Prompt, engines, capacity, blockSize int) References {
	pooled, hits := PooledLRU(prompts, engines*capacity, blockSize)
	return References{
		Infinite:   InfiniteCacheBound(prompts),
		Pooled:     pooled,
		PooledHits: hits,
		Oracle:     Oracle(prompts, engines, capacity, blockSize),
	}
}

// hitLimit is how many of a prompt's blocks an engine can take from its
// cache: it always computes at least one token (see mocker), so a prompt
// whose length is a whole number of blocks recomputes its last block. The
// references apply the same cap so that they count hits as the engines do.
func hitLimit(p *Prompt, blockSize int) int {
	return min(len(p.Hashes), max(p.InputTokens-1, 0)/blockSize)
}

// PooledLRU is the block hit ratio of one cache of capacity blocks shared
// by the whole fleet, evicting the least recently used block as the engines
// do, serving the prompts one after the other in arrival order. It returns
// the hits of each prompt too. A prompt's blocks are used tail first, as an
// engine releases them, so a sequence's deepest blocks are evicted before
// its parents and the cache stays prefix-closed. It is the fleet's capacity
// without the cost of splitting it: no block is held twice and no engine is
// fuller than another. It ignores time: a block is reusable as soon as its
// prompt arrived, and running requests hold nothing.
func PooledLRU(prompts []Prompt, capacity, blockSize int) (float64, []int32) {
	c := newLRUCache(capacity)
	per := make([]int32, len(prompts))
	var hits, total int64
	for i := range prompts {
		p := &prompts[i]
		h := c.prefix(p.Hashes, hitLimit(p, blockSize))
		per[i] = int32(h)
		hits += int64(h)
		total += int64(len(p.Hashes))
		for j := len(p.Hashes) - 1; j >= 0; j-- {
			c.touch(p.Hashes[j])
		}
	}
	return ratio(hits, total), per
}

func ratio(hits, total int64) float64 {
	if total == 0 {
		return 0
	}
	return float64(hits) / float64(total)
}

// lruCache is a set of sequence hashes with least-recently-used eviction:
// an intrusive list, most recent at the back.
type lruCache struct {
	capacity int
	byHash   map[routing.SeqHash]*list.Element
	order    list.List // front: least recently used
}

func newLRUCache(capacity int) *lruCache {
	return &lruCache{capacity: capacity, byHash: make(map[routing.SeqHash]*list.Element)}
}

// prefix is the length of the longest cached prefix of hs, at most limit.
func (c *lruCache) prefix(hs []routing.SeqHash, limit int) int {
	n := 0
	for n < limit {
		if _, ok := c.byHash[hs[n]]; !ok {
			break
		}
		n++
	}
	return n
}

// touch makes h the most recently used block, inserting it and evicting
// the least recently used one when the cache is full.
func (c *lruCache) touch(h routing.SeqHash) {
	if c.capacity <= 0 {
		return
	}
	if e, ok := c.byHash[h]; ok {
		c.order.MoveToBack(e)
		return
	}
	if len(c.byHash) >= c.capacity {
		old := c.order.Front()
		c.order.Remove(old)
		delete(c.byHash, old.Value.(routing.SeqHash))
	}
	c.byHash[h] = c.order.PushBack(h)
}

// never is the next use of a block that no later prompt uses.
const never = math.MaxInt32

// uses lists, for every sequence hash, the prompts that use it, in order.
type uses map[routing.SeqHash][]int32

func newUses(prompts []Prompt) uses {
	u := make(uses)
	for i := range prompts {
		for _, h := range prompts[i].Hashes {
			u[h] = append(u[h], int32(i))
		}
	}
	return u
}

// after is the first prompt after i that uses h, or never.
func (u uses) after(h routing.SeqHash, i int32) int32 {
	l := u[h]
	k, _ := slices.BinarySearch(l, i+1)
	if k == len(l) {
		return never
	}
	return l[k]
}

// refreshEvery is how many prompts the oracle serves between two
// refreshes of its caches' next uses (see beladyCache.refresh).
const refreshEvery = 64

// Oracle is the block hit ratio of a clairvoyant placement on engines
// caches of capacity blocks each. It serves the prompts one after the
// other in arrival order and knows, for every block, the next prompt that
// will use it:
//   - placement: each prompt goes to the engine holding its longest cached
//     prefix among those whose prefill work (blocks computed so far, this
//     prompt's misses included) stays within 10% of the fleet's mean plus
//     the prompt itself; among equals, to the one whose first eviction
//     victim is needed latest (or that needs no eviction), then to the one
//     that has computed the fewest blocks, then to the lowest index. Without the balance, every
//     prompt would follow the first shared system prompt to one engine;
//     the least loaded engine always qualifies;
//   - eviction: each engine evicts the block whose next use is furthest in
//     the future (Belady's rule), deepest first among equals, never a block
//     of the prompt being served; a child's next use is never before its
//     parent's, so the cache stays prefix-closed.
//
// It ignores time and load as PooledLRU does. It is a greedy reference,
// not a bound: a placement that sacrifices a hit now for more later can
// beat it, and it does not know which engine a future prompt will go to
// (it takes the next use anywhere as the next use on this engine).
func Oracle(prompts []Prompt, engines, capacity, blockSize int) float64 {
	u := newUses(prompts)
	caches := make([]*beladyCache, engines)
	for i := range caches {
		caches[i] = newBeladyCache(capacity)
	}
	var hits, total int64
	for i := range prompts {
		if i%refreshEvery == 0 {
			for _, c := range caches {
				c.refresh(u, int32(i))
			}
		}
		p := &prompts[i]
		limit := hitLimit(p, blockSize)
		e, h := oraclePlace(caches, p, limit)
		hits += int64(h)
		total += int64(len(p.Hashes))
		caches[e].serve(p, u, int32(i))
	}
	return ratio(hits, total)
}

// oracleSlack is the imbalance of prefill work the oracle allows: 10% of
// the fleet's mean (plus the prompt at hand), the balance a router is
// asked to keep (load max/mean 1.1).
const oracleSlack = 1.1

// oraclePlace picks the engine for p and returns it with p's hits there.
func oraclePlace(caches []*beladyCache, p *Prompt, limit int) (int, int) {
	var total int64
	for _, c := range caches {
		total += c.work
	}
	n := int64(len(p.Hashes))
	ceiling := oracleSlack*float64(total+n)/float64(len(caches)) + float64(n)
	best, bestHits, bestVictim := -1, -1, int32(0)
	for e, c := range caches {
		h := c.prefix(p.Hashes, limit)
		if float64(c.work+n-int64(h)) > ceiling {
			continue
		}
		v := c.victim(len(p.Hashes) - h)
		if h > bestHits || h == bestHits && (v > bestVictim || v == bestVictim && c.work < caches[best].work) {
			best, bestHits, bestVictim = e, h, v
		}
	}
	caches[best].work += n - int64(bestHits)
	return best, bestHits
}

// beladyCache is one engine's cache under Belady's eviction rule: a
// max-heap of blocks by next use, with stale entries skipped lazily.
type beladyCache struct {
	capacity int
	byHash   map[routing.SeqHash]*beladyBlock
	heap     beladyHeap
	// work is the blocks the engine has computed (missed) so far.
	work int64
}

type beladyBlock struct {
	next    int32 // index of the next prompt using the block
	pos     int32
	version int32
}

type beladyEntry struct {
	b       *beladyBlock
	h       routing.SeqHash
	next    int32
	pos     int32
	version int32
}

func newBeladyCache(capacity int) *beladyCache {
	return &beladyCache{capacity: capacity, byHash: make(map[routing.SeqHash]*beladyBlock)}
}

func (c *beladyCache) prefix(hs []routing.SeqHash, limit int) int {
	n := 0
	for n < limit {
		if _, ok := c.byHash[hs[n]]; !ok {
			break
		}
		n++
	}
	return n
}

// serve uses every block of p (prompt i), inserting the missing ones. The
// prompt's blocks go back on the heap only once it is served, so that none
// of them is evicted to make room for another.
func (c *beladyCache) serve(p *Prompt, u uses, i int32) {
	used := make([]beladyEntry, 0, len(p.Hashes))
	for j, h := range p.Hashes {
		b, ok := c.byHash[h]
		if !ok {
			if len(c.byHash) >= c.capacity && !c.evict() {
				break // every block is the prompt's own: it cannot grow
			}
			b = &beladyBlock{pos: int32(j)}
			c.byHash[h] = b
		}
		b.next = u.after(h, i)
		b.version++ // the block's heap entries are stale until pushed again
		used = append(used, beladyEntry{b: b, h: h, next: b.next, pos: b.pos, version: b.version})
	}
	for _, e := range used {
		heap.Push(&c.heap, e)
	}
}

// victim is the next use of the block that storing n new blocks would
// evict first, or never when the cache has room for them.
func (c *beladyCache) victim(n int) int32 {
	if c.capacity-len(c.byHash) >= n {
		return never
	}
	for len(c.heap) > 0 {
		top := c.heap[0]
		if b, ok := c.byHash[top.h]; ok && b == top.b && b.version == top.version {
			return top.next
		}
		heap.Pop(&c.heap)
	}
	return never
}

// refresh recomputes the next use of every block whose recorded next use
// has passed (that prompt went to another engine) and rebuilds the heap.
// Without it such a block would look needed soonest and never be evicted.
func (c *beladyCache) refresh(u uses, i int32) {
	c.heap = c.heap[:0]
	for h, b := range c.byHash {
		if b.next < i {
			b.next = u.after(h, i-1)
		}
		b.version++
		c.heap = append(c.heap, beladyEntry{b: b, h: h, next: b.next, pos: b.pos, version: b.version})
	}
	heap.Init(&c.heap)
}

// evict removes the block needed furthest in the future, skipping stale
// entries, and reports whether there was one.
func (c *beladyCache) evict() bool {
	for len(c.heap) > 0 {
		top := heap.Pop(&c.heap).(beladyEntry)
		if b, ok := c.byHash[top.h]; ok && b == top.b && b.version == top.version {
			delete(c.byHash, top.h)
			return true
		}
	}
	return false
}

// beladyHeap orders entries by next use, furthest first, then by depth,
// deepest first.
type beladyHeap []beladyEntry

func (h beladyHeap) Len() int { return len(h) }
func (h beladyHeap) Less(i, j int) bool {
	if h[i].next != h[j].next {
		return h[i].next > h[j].next
	}
	return h[i].pos > h[j].pos
}
func (h beladyHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *beladyHeap) Push(x any)   { *h = append(*h, x.(beladyEntry)) }
func (h *beladyHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
