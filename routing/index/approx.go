package index

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// Lease names the blocks one recorded request keeps referenced in the LRU
// policy until Release. The TTL policy hands out no leases (0).
type Lease uint64

// Approx is the approximate prefix index: with no KV events, the router
// records its own routing decisions and assumes the chosen worker now holds
// the request's blocks on its device. The zero value is not usable; call
// NewApprox.
//
// All methods are safe for concurrent use: Record, Release, SetWorker,
// RemoveWorker and Prune serialize on a mutex, FindMatches and Stats share
// it.
type Approx struct {
	mu      sync.RWMutex
	cfg     ApproxConfig
	slots   map[routing.Worker]uint32
	workers []approxWorker
	free    []uint32
	// blocks lists, per sequence hash, the workers holding it.
	blocks map[routing.SeqHash][]approxOwner
	pairs  int
	ttl    ttlHeap
	leases map[Lease]lease
	next   Lease
	epoch  uint64
	stats  approxCounters
}

// approxOwner is one worker's copy of a block. exp is the expiry in Unix
// nanoseconds (math.MaxInt64 under the LRU policy); pos is the block's
// depth in the request that recorded it.
type approxOwner struct {
	slot uint32
	pos  int32
	exp  int64
}

// approxWorker is one worker's LRU state. gen tells a lease whether the
// slot still belongs to the worker it was taken on.
type approxWorker struct {
	w         routing.Worker
	gen       uint64
	capacity  int
	held      int
	lru       map[routing.SeqHash]*lruEntry
	evictable lruHeap
}

type approxCounters struct {
	expired, pruned, evicted uint64
}

// ApproxStats is a snapshot of an approximate index.
type ApproxStats struct {
	// Blocks is the number of distinct sequence hashes; Pairs the number of
	// (worker, block) entries, expired ones included until they are pruned.
	Blocks, Pairs, Workers int
	// Leases is the number of unreleased leases (LRU).
	Leases int
	// Expired, Pruned and Evicted count entries dropped by TTL expiry, by
	// the MaxBlocks bound and by LRU capacity.
	Expired, Pruned, Evicted uint64
}

// NewApprox returns an empty approximate index; zero config fields take
// their defaults.
func NewApprox(cfg ApproxConfig) (*Approx, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Approx{
		cfg:    cfg,
		slots:  make(map[routing.Worker]uint32),
		blocks: make(map[routing.SeqHash][]approxOwner),
		leases: make(map[Lease]lease),
	}, nil
}

// Record notes that the request with the given block hashes was routed to
// w at now. Under the TTL policy each block's expiry becomes now+TTL and
// the lease is 0; under the LRU policy the blocks stay referenced until the
// returned lease is released, and w must have been declared with SetWorker.
func (a *Approx) Record(w routing.Worker, hashes []routing.SeqHash, now time.Time) (Lease, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cfg.Policy == PolicyLRU {
		return a.recordLRU(w, hashes)
	}
	if len(hashes) == 0 {
		return 0, nil
	}
	slot, err := a.intern(w)
	if err != nil {
		return 0, err
	}
	a.recordTTL(slot, hashes, now.UnixNano())
	return 0, nil
}

// intern returns w's slot, creating it when needed.
func (a *Approx) intern(w routing.Worker) (uint32, error) {
	if slot, ok := a.slots[w]; ok {
		return slot, nil
	}
	var slot uint32
	if n := len(a.free); n > 0 {
		slot = a.free[n-1]
		a.free = a.free[:n-1]
	} else {
		if len(a.workers) >= math.MaxUint32 {
			return 0, fmt.Errorf("%w: %d", ErrTooManyWorkers, len(a.workers))
		}
		slot = uint32(len(a.workers))
		a.workers = append(a.workers, approxWorker{})
	}
	gen := a.workers[slot].gen + 1
	a.workers[slot] = approxWorker{w: w, gen: gen}
	a.slots[w] = slot
	return slot, nil
}

// upsert gives slot a copy of seq with the expiry and depth, and reports
// whether the copy is new.
func (a *Approx) upsert(seq routing.SeqHash, slot uint32, pos int32, exp int64) bool {
	os := a.blocks[seq]
	for i := range os {
		if os[i].slot == slot {
			os[i].pos, os[i].exp = pos, exp
			return false
		}
	}
	a.blocks[seq] = append(os, approxOwner{slot: slot, pos: pos, exp: exp})
	a.pairs++
	a.workers[slot].held++
	return true
}

// owner returns slot's copy of seq, or nil.
func (a *Approx) owner(seq routing.SeqHash, slot uint32) *approxOwner {
	os := a.blocks[seq]
	for i := range os {
		if os[i].slot == slot {
			return &os[i]
		}
	}
	return nil
}

// drop removes slot's copy of seq.
func (a *Approx) drop(seq routing.SeqHash, slot uint32) {
	os := a.blocks[seq]
	for i := range os {
		if os[i].slot != slot {
			continue
		}
		os = slices.Delete(os, i, i+1)
		if len(os) == 0 {
			delete(a.blocks, seq)
		} else {
			a.blocks[seq] = os
		}
		a.pairs--
		a.workers[slot].held--
		return
	}
}

// FindMatches appends, for every worker holding hashes[0] unexpired, the
// depth of the prefix it holds (as Overlap.Device; the approximate index
// knows no other tier), sorted by worker.
func (a *Approx) FindMatches(hashes []routing.SeqHash, now time.Time, dst []routing.Match) []routing.Match {
	if len(hashes) == 0 {
		return dst
	}
	t := now.UnixNano()
	a.mu.RLock()
	defer a.mu.RUnlock()
	var buf [16]cand
	active := buf[:0]
	for _, o := range a.blocks[hashes[0]] {
		if o.exp > t {
			active = append(active, cand{slot: o.slot, ov: routing.Overlap{Device: 1}})
		}
	}
	start := len(dst)
	for i := 1; i < len(hashes) && len(active) > 0; i++ {
		n := 0
		for _, c := range active {
			if o := a.owner(hashes[i], c.slot); o != nil && o.exp > t {
				c.ov.Device++
				active[n] = c
				n++
				continue
			}
			dst = append(dst, routing.Match{Worker: a.workers[c.slot].w, Overlap: c.ov})
		}
		active = active[:n]
	}
	for _, c := range active {
		dst = append(dst, routing.Match{Worker: a.workers[c.slot].w, Overlap: c.ov})
	}
	slices.SortFunc(dst[start:], func(x, y routing.Match) int { return x.Worker.Compare(y.Worker) })
	return dst
}

// RemoveWorker forgets w and every block recorded for it, and reports
// whether w was known. Its unreleased leases become no-ops.
func (a *Approx) RemoveWorker(w routing.Worker) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	slot, ok := a.slots[w]
	if !ok {
		return false
	}
	for seq, os := range a.blocks {
		for _, o := range os {
			if o.slot == slot {
				a.drop(seq, slot)
				break
			}
		}
	}
	a.workers[slot] = approxWorker{gen: a.workers[slot].gen}
	delete(a.slots, w)
	a.free = append(a.free, slot)
	return true
}

// Stats returns the index's size and counters.
func (a *Approx) Stats() ApproxStats {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return ApproxStats{
		Blocks: len(a.blocks), Pairs: a.pairs, Workers: len(a.slots), Leases: len(a.leases),
		Expired: a.stats.expired, Pruned: a.stats.pruned, Evicted: a.stats.evicted,
	}
}
