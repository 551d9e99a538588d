package index

import "github.com/kvrouter/kvrouter/routing"

// Owner words pack a worker slot and its tier bits into 32 bits:
// slot<<4 | tiers, with bit i of tiers set when the block is held on
// routing.Tier(i). Sorting words sorts by slot, which lets a query merge a
// block's owners with its sorted candidates. The top bit is reserved for
// the overflow flag of owners.a, so slots stay below maxSlots (2^27).
const (
	tierBits  = 4
	tierMask  = 1<<tierBits - 1
	overflow  = 1 << 31
	maxSlots  = 1 << (31 - tierBits)
	deviceBit = 1 << routing.TierDevice
	hostBit   = 1 << routing.TierHost
	diskBit   = 1 << routing.TierDisk
	sharedBit = 1 << routing.TierShared
)

// owners is a block's owner set. Up to two owners are stored inline as
// words with a's slot below b's (0 = none); a third owner moves the set to
// an overflow list, and a then holds overflow|list index. Most blocks have
// one or two owners, so the common case costs 8 bytes and no pointer.
type owners struct {
	a, b uint32
}

// empty reports whether no worker holds the block.
func (o *owners) empty() bool { return o.a == 0 }

// ownerLists holds the overflow lists of blocks with three or more owners,
// each sorted by slot, with a free list of indexes for reuse.
type ownerLists struct {
	lists [][]uint32
	free  []uint32
}

// view returns the owner words of o in slot order. buf backs the inline
// case so that the query path does not allocate.
func (l *ownerLists) view(o *owners, buf *[2]uint32) []uint32 {
	if o.a&overflow != 0 {
		return l.lists[o.a&^overflow]
	}
	buf[0], buf[1] = o.a, o.b
	switch {
	case o.b != 0:
		return buf[:2]
	case o.a != 0:
		return buf[:1]
	}
	return buf[:0]
}

// tiers returns the tier bits slot holds in o.
func (l *ownerLists) tiers(o *owners, slot uint32) uint8 {
	var buf [2]uint32
	v := l.view(o, &buf)
	if i, ok := searchSlot(v, 0, slot); ok {
		return uint8(v[i] & tierMask)
	}
	return 0
}

// set makes slot hold exactly tiers in o (0 removes it) and returns the
// tier bits it held before.
func (l *ownerLists) set(o *owners, slot uint32, tiers uint8) uint8 {
	if o.a&overflow != 0 {
		return l.setList(o, slot, tiers)
	}
	var w uint32
	if tiers != 0 {
		w = slot<<tierBits | uint32(tiers)
	}
	switch {
	case o.a != 0 && o.a>>tierBits == slot:
		old := uint8(o.a & tierMask)
		if w == 0 {
			o.a, o.b = o.b, 0
		} else {
			o.a = w
		}
		return old
	case o.b != 0 && o.b>>tierBits == slot:
		old := uint8(o.b & tierMask)
		o.b = w
		return old
	}
	switch {
	case w == 0:
	case o.a == 0:
		o.a = w
	case o.b == 0 && w < o.a:
		o.a, o.b = w, o.a
	case o.b == 0:
		o.b = w
	default:
		l.promote(o, w)
	}
	return 0
}

// promote moves a full inline pair plus one new word to an overflow list.
func (l *ownerLists) promote(o *owners, w uint32) {
	list := insertWord(append(make([]uint32, 0, 4), o.a, o.b), w)
	var idx uint32
	if n := len(l.free); n > 0 {
		idx = l.free[n-1]
		l.free = l.free[:n-1]
		l.lists[idx] = list
	} else {
		idx = uint32(len(l.lists))
		l.lists = append(l.lists, list)
	}
	o.a, o.b = overflow|idx, 0
}

// setList is set for an overflowed owner set; it moves the set back inline
// when two owners remain.
func (l *ownerLists) setList(o *owners, slot uint32, tiers uint8) uint8 {
	idx := o.a &^ overflow
	list := l.lists[idx]
	i, found := searchSlot(list, 0, slot)
	var old uint8
	if found {
		old = uint8(list[i] & tierMask)
		if tiers != 0 {
			list[i] = slot<<tierBits | uint32(tiers)
			return old
		}
		list = append(list[:i], list[i+1:]...)
	} else if tiers != 0 {
		list = insertWord(list, slot<<tierBits|uint32(tiers))
	}
	if len(list) > 2 {
		l.lists[idx] = list
		return old
	}
	o.a, o.b = list[0], list[1]
	l.lists[idx] = nil
	l.free = append(l.free, idx)
	return old
}

// insertWord inserts w into the sorted words v.
func insertWord(v []uint32, w uint32) []uint32 {
	i, _ := searchSlot(v, 0, w>>tierBits)
	v = append(v, 0)
	copy(v[i+1:], v[i:])
	v[i] = w
	return v
}

// searchSlot finds slot in the sorted words v[from:], returning its index
// or the index where it would be inserted.
func searchSlot(v []uint32, from int, slot uint32) (int, bool) {
	lo, hi := from, len(v)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if v[m]>>tierBits < slot {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(v) && v[lo]>>tierBits == slot
}
