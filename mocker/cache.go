package mocker

import (
	"github.com/kvrouter/kvrouter/routing"
)

// block is one cached (hashed) prompt block. Blocks without a hash (partial
// prompt tails, output tokens, duplicates of an already cached block) are not
// materialised: the cache only counts them.
type block struct {
	seq   routing.SeqHash
	local routing.LocalHash
	// pos is the block's index in its sequence; a block at pos 0 is a
	// sequence root, any other block's parent is the block before it.
	pos  int
	refs int32
	// parent is the sequence hash of the block before this one (pos > 0).
	parent routing.SeqHash
	// prev and next link the block into the LRU list while refs is zero.
	prev, next *block
}

// cache is the paged KV cache of one engine: total physical blocks, split
// into free blocks (holding nothing), cached blocks (hashed, possibly
// unreferenced) and anonymous blocks held by running requests.
//
// Invariants: free + evictable + referenced cached + anonymous = total; every
// unreferenced cached block is on the LRU list and no referenced block is;
// the cached set is prefix-closed (a cached block's parent is cached),
// because requests hold whole prefixes and release them tail first.
type cache struct {
	total  int
	free   int
	byHash map[routing.SeqHash]*block
	lru    lruList
	log    *eventLog
}

func newCache(total int, log *eventLog) *cache {
	return &cache{total: total, free: total, byHash: make(map[routing.SeqHash]*block), log: log}
}

// used is the number of blocks held by running requests, as vLLM's KV usage:
// neither free nor evictable.
func (c *cache) used() int { return c.total - c.free - c.lru.n }

// available is the number of blocks an allocation can obtain.
func (c *cache) available() int { return c.free + c.lru.n }

// prefix returns the length of the longest cached prefix of seqs, at most
// limit blocks, and how many of those blocks are unreferenced (acquiring
// them removes them from the evictable pool).
func (c *cache) prefix(seqs []routing.SeqHash, limit int) (hits, idle int) {
	for hits < limit && hits < len(seqs) {
		b, ok := c.byHash[seqs[hits]]
		if !ok {
			break
		}
		if b.refs == 0 {
			idle++
		}
		hits++
	}
	return hits, idle
}

// acquire references the cached blocks of seqs (all of which must be
// cached, as returned by prefix) and appends them to dst.
func (c *cache) acquire(dst []*block, seqs []routing.SeqHash) []*block {
	for _, s := range seqs {
		b := c.byHash[s]
		c.ref(b)
		dst = append(dst, b)
	}
	return dst
}

func (c *cache) ref(b *block) {
	if b.refs == 0 {
		c.lru.remove(b)
	}
	b.refs++
}

// allocate takes n anonymous blocks, from the free pool first and then by
// evicting least recently used cached blocks, which it publishes as one
// Removed event. It reports false, changing nothing, when fewer than n blocks
// are available.
func (c *cache) allocate(n int) bool {
	if n <= 0 {
		return true
	}
	if n > c.available() {
		return false
	}
	take := min(n, c.free)
	c.free -= take
	if n == take {
		return true
	}
	removed := make([]routing.EngineHash, 0, n-take)
	for range n - take {
		b := c.lru.popFront()
		delete(c.byHash, b.seq)
		removed = append(removed, EngineHash(b.seq))
	}
	c.log.emit(routing.Event{Kind: routing.EventRemoved, Removed: removed})
	return true
}

// release drops a request's references, tail first so that the deepest
// blocks become the least recently used and are evicted before their
// parents, and returns its anonymous blocks to the free pool.
func (c *cache) release(refs []*block, anon int) {
	for i := len(refs) - 1; i >= 0; i-- {
		b := refs[i]
		b.refs--
		if b.refs == 0 {
			c.lru.pushBack(b)
		}
	}
	c.free += anon
}

// commit turns one anonymous block, whose prompt tokens have just been
// computed, into the cached block seq. When seq is already cached (another
// request computed the same block at the same time) the request adopts the
// cached copy and its private block returns to the free pool. The returned
// block is referenced; stored says whether it is new.
func (c *cache) commit(seq, parent routing.SeqHash, local routing.LocalHash, pos int) (b *block, stored bool) {
	if b, ok := c.byHash[seq]; ok {
		c.ref(b)
		c.free++
		return b, false
	}
	b = &block{seq: seq, local: local, pos: pos, refs: 1, parent: parent}
	c.byHash[seq] = b
	return b, true
}

// clear drops every cached block and publishes Cleared. The caller ensures
// no block is referenced.
func (c *cache) clear() {
	clear(c.byHash)
	c.lru = lruList{}
	c.free = c.total
	c.log.emit(routing.Event{Kind: routing.EventCleared})
}

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
