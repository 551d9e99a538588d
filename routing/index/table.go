package index

import "math/bits"

// Table sizing. The table grows at 4/5 load by a factor of 9/8, so its load
// stays between 0.71 and 0.8. The band is a measured trade-off: memory per
// entry is 16 B / load, while an insert or delete shifts the rest of its
// run, whose length grows like 1/(1-load)^2. On the exact-index benchmark a
// stored-then-removed block cost about 400 ns at 0.9 load against about
// 200 ns at 0.73. The small growth factor keeps the low end of the band high
// at the price of more frequent (amortized) rehashing while a table grows.
const (
	tableLoadNum  = 4
	tableLoadDen  = 5
	tableGrowNum  = 9
	tableGrowDen  = 8
	tableMinCap   = 8
	tableMinSlack = 32
)

// entry is one occupied or empty (key 0) slot of a table.
type entry[V any] struct {
	key uint64
	val V
}

// table is an open-addressing hash map from uint64 keys to V, with sorted
// linear probing (the Robin Hood order): along every run of occupied slots
// the home positions never decrease. Slots store the mixed key (mix is a
// bijection), whose multiply-high by the capacity is the home position, so
// walking a run costs one multiplication per slot and capacities need not
// be powers of two. Slots past cap form an overflow slack instead of
// wrapping around; a run that would leave the slack grows the table. The
// mixed key 0 (raw key 0) marks an empty slot; key 0 is kept aside in
// zero/hasZero.
//
// Pointers returned by ptr, put and upsert stay valid until the next put,
// upsert or del.
type table[V any] struct {
	slots   []entry[V]
	cap     int
	n       int
	hasZero bool
	zero    V
}

// mixMul and mixInv are the multiplier of mix and its inverse modulo 2^64.
const (
	mixMul = 0xd6e8feb86659fd93
	mixInv = 0xcfee444d8b59a89b
)

// mix scrambles a key so that sequential engine ids spread like hashes. It
// is a bijection (xor-shifts and an odd multiplier), undone by unmix.
func mix(k uint64) uint64 {
	k ^= k >> 32
	k *= mixMul
	k ^= k >> 32
	return k
}

// unmix is the inverse of mix.
func unmix(m uint64) uint64 {
	m ^= m >> 32
	m *= mixInv
	m ^= m >> 32
	return m
}

// home is the first slot a mixed key may occupy.
func (t *table[V]) home(m uint64) int {
	hi, _ := bits.Mul64(m, uint64(t.cap))
	return int(hi)
}

// len returns the number of keys.
func (t *table[V]) len() int {
	if t.hasZero {
		return t.n + 1
	}
	return t.n
}

// find returns the slot index of the mixed key m, or -1. The first probes only compare
// keys (most keys sit within a few slots of home); later ones also stop at
// the first slot whose home lies past k's, which bounds a miss's walk.
func (t *table[V]) find(m uint64) int {
	if t.n == 0 {
		return -1
	}
	h := t.home(m)
	end := min(h+findQuick, len(t.slots))
	for i := h; i < end; i++ {
		switch t.slots[i].key {
		case m:
			return i
		case 0:
			return -1
		}
	}
	for i := end; i < len(t.slots); i++ {
		s := &t.slots[i]
		if s.key == m {
			return i
		}
		if s.key == 0 || t.home(s.key) > h {
			return -1
		}
	}
	return -1
}

// findQuick is the number of probes find makes without computing homes.
const findQuick = 4

// ptr returns a pointer to k's value, or nil when k is absent.
func (t *table[V]) ptr(k uint64) *V {
	if k == 0 {
		if t.hasZero {
			return &t.zero
		}
		return nil
	}
	if i := t.find(mix(k)); i >= 0 {
		return &t.slots[i].val
	}
	return nil
}

// get returns k's value and whether it is present.
func (t *table[V]) get(k uint64) (V, bool) {
	if p := t.ptr(k); p != nil {
		return *p, true
	}
	var zero V
	return zero, false
}

// upsert returns a pointer to k's value, adding k with the zero value when
// absent, and reports whether k was present.
func (t *table[V]) upsert(k uint64) (*V, bool) {
	if p := t.ptr(k); p != nil {
		return p, true
	}
	var zero V
	if k == 0 {
		t.hasZero, t.zero = true, zero
		return &t.zero, false
	}
	if (t.n+1)*tableLoadDen > t.cap*tableLoadNum {
		t.resize(t.cap * tableGrowNum / tableGrowDen)
	}
	for {
		if i := t.insert(mix(k), zero); i >= 0 {
			return &t.slots[i].val, false
		}
		t.resize(t.cap * tableGrowNum / tableGrowDen)
	}
}

// insert places an absent mixed key in sorted order, shifting the rest of its run
// one slot right. It returns -1 when the run would leave the slack.
func (t *table[V]) insert(m uint64, v V) int {
	h := t.home(m)
	p := h
	for p < len(t.slots) && t.slots[p].key != 0 && t.home(t.slots[p].key) <= h {
		p++
	}
	e := p
	for e < len(t.slots) && t.slots[e].key != 0 {
		e++
	}
	if e == len(t.slots) {
		return -1
	}
	copy(t.slots[p+1:e+1], t.slots[p:e])
	t.slots[p] = entry[V]{key: m, val: v}
	t.n++
	return p
}

// del removes k and reports whether it was present. The displaced tail of
// the run shifts back one slot, so no tombstones are left.
func (t *table[V]) del(k uint64) bool {
	if k == 0 {
		was := t.hasZero
		var zero V
		t.hasZero, t.zero = false, zero
		return was
	}
	i := t.find(mix(k))
	if i < 0 {
		return false
	}
	j := i + 1
	for j < len(t.slots) && t.slots[j].key != 0 && t.home(t.slots[j].key) < j {
		j++
	}
	copy(t.slots[i:j-1], t.slots[i+1:j])
	t.slots[j-1] = entry[V]{}
	t.n--
	// A table that fell below a fifth of its capacity (a worker that
	// evicted most of its blocks) shrinks back into the load band.
	if t.cap > 4*tableMinCap && t.n*5 < t.cap {
		t.resize(t.n * tableGrowNum * tableLoadDen / (tableGrowDen * tableLoadNum))
	}
	return true
}

// resize rebuilds the table with room for newCap keys at full load.
func (t *table[V]) resize(newCap int) {
	newCap = max(newCap, tableMinCap, t.n+1)
	for {
		old := t.slots
		t.cap = newCap
		t.slots = make([]entry[V], newCap+tableMinSlack+newCap/64)
		t.n = 0
		ok := true
		for i := range old {
			if old[i].key != 0 && t.insert(old[i].key, old[i].val) < 0 {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		t.slots = old
		newCap = newCap * tableGrowNum / tableGrowDen
	}
}

// each calls fn for every key until fn returns false. fn must not modify
// the table.
func (t *table[V]) each(fn func(k uint64, v *V) bool) {
	if t.hasZero && !fn(0, &t.zero) {
		return
	}
	for i := range t.slots {
		if t.slots[i].key != 0 && !fn(unmix(t.slots[i].key), &t.slots[i].val) {
			return
		}
	}
}

// reset drops every key and releases the storage.
func (t *table[V]) reset() { *t = table[V]{} }

// touch loads the slots where a lookup of k will look (the home slot and
// the one a cache line further, as keys sit a few slots past home) and returns a value derived from them. Callers touch the keys
// of a whole batch before walking it, so that the cache misses of
// independent lookups overlap: a lookup's own walk branches on the loaded
// key, and a mispredicted branch would otherwise serialize the misses.
func (t *table[V]) touch(k uint64) uint64 {
	if t.cap == 0 {
		return 0
	}
	h := t.home(mix(k))
	return t.slots[h].key + t.slots[h+touchAhead].key
}

// touchAhead is the slot distance of touch's second load; the slack past
// cap is always longer than it.
const touchAhead = 4
