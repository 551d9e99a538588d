package index

import (
	"slices"

	"github.com/kvrouter/kvrouter/routing"
)

// Phases of a candidate's prefix walk: first the device run, then the host
// run that continues it, then the disk run, then done.
const (
	phaseDevice uint8 = iota
	phaseHost
	phaseDisk
	phaseDone
)

// cand is one worker's walk state during a query.
type cand struct {
	slot  uint32
	phase uint8
	ov    routing.Overlap
}

// step extends the walk by one block held on the tiers t (0: not held).
// A run only continues on its own tier; when it breaks, the block may
// start the next tier's run, so the three depths stay disjoint and
// consecutive, as routing.Overlap defines them.
func (c *cand) step(t uint8) {
	if c.phase == phaseDevice {
		if t&deviceBit != 0 {
			c.ov.Device++
			return
		}
		c.phase = phaseHost
	}
	if c.phase == phaseHost {
		if t&hostBit != 0 {
			c.ov.Host++
			return
		}
		c.phase = phaseDisk
	}
	if c.phase == phaseDisk && t&diskBit != 0 {
		c.ov.Disk++
		return
	}
	c.phase = phaseDone
}

// queryScratch holds a query's candidates between calls.
type queryScratch struct {
	active []cand
	done   []cand
	sink   uint64
}

// The lookups of a request's blocks are independent, so a query resolves
// them a window at a time, loading the window's slots together: their
// cache misses (about 150 ns each on a table of a million blocks) then
// overlap instead of being serialized behind each lookup's data-dependent
// branches. The first window is small, bounding the wasted loads when the
// walk stops early; each next one doubles, up to maxWindow, since a walk
// that got this far is likely to go on.
const (
	firstWindow = 8
	maxWindow   = 32
)

// resolve looks up a window of hashes into ps, touching every slot first
// and then the overflow lists of the blocks that have one (blocks held by
// three or more workers, typically the shared system prompt a query starts
// with). It returns how many leading hashes are held by anyone.
func (e *Exact) resolve(win []routing.SeqHash, ps *[maxWindow]*owners, sc *queryScratch) int {
	for _, h := range win {
		sc.sink += e.blocks.touch(uint64(h))
	}
	n := 0
	for _, h := range win {
		p := e.blocks.ptr(uint64(h))
		if p == nil {
			break
		}
		ps[n] = p
		n++
	}
	for _, p := range ps[:n] {
		if p.a&overflow != 0 {
			if l := e.lists.lists[p.a&^overflow]; len(l) > 0 {
				sc.sink += uint64(l[0])
			}
		}
	}
	return n
}

// FindMatches appends to dst, for every worker holding hashes[0] on some
// tier, its overlap with the request (see routing.Overlap): the device
// depth from block 0, then the host and disk runs that continue it.
// Results are sorted by worker (engine id, then rank); workers holding
// nothing at block 0 are omitted. The walk stops as soon as no worker
// continues. It does not allocate when dst has room for the results.
func (e *Exact) FindMatches(hashes []routing.SeqHash, dst []routing.Match) []routing.Match {
	if len(hashes) == 0 {
		return dst
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	p := e.blocks.ptr(uint64(hashes[0]))
	if p == nil {
		return dst
	}
	sc, _ := e.scratch.Get().(*queryScratch)
	if sc == nil {
		sc = &queryScratch{}
	}
	var buf [2]uint32
	active, done := sc.active[:0], sc.done[:0]
	for _, w := range e.lists.view(p, &buf) {
		c := cand{slot: w >> tierBits}
		c.step(uint8(w & tierMask))
		active = append(active, c)
	}
	var ps [maxWindow]*owners
	size := firstWindow
	for base := 1; base < len(hashes) && len(active) > 0; base, size = base+size, min(2*size, maxWindow) {
		win := hashes[base:min(base+size, len(hashes))]
		n := e.resolve(win, &ps, sc)
		for k := 0; k < n && len(active) > 0; k++ {
			active, done = advance(active, done, e.lists.view(ps[k], &buf))
		}
		if n < len(win) {
			break
		}
	}
	start := len(dst)
	dst = e.appendMatches(dst, active)
	dst = e.appendMatches(dst, done)
	slices.SortFunc(dst[start:], func(a, b routing.Match) int { return a.Worker.Compare(b.Worker) })
	sc.active, sc.done = active, done
	e.scratch.Put(sc)
	return dst
}

// advance steps every active candidate over one block whose owner words
// are ws, keeping the still-active ones in slot order and moving finished
// ones to done. Both lists are sorted by slot, so one forward pass (binary
// search when the block has many more owners than candidates) finds each
// candidate's tiers.
func advance(active, done []cand, ws []uint32) ([]cand, []cand) {
	n, j := 0, 0
	gallop := len(ws) > 8*len(active)
	for k := range active {
		c := &active[k]
		var t uint8
		if gallop {
			var ok bool
			if j, ok = searchSlot(ws, j, c.slot); ok {
				t = uint8(ws[j] & tierMask)
			}
		} else {
			for j < len(ws) && ws[j]>>tierBits < c.slot {
				j++
			}
			if j < len(ws) && ws[j]>>tierBits == c.slot {
				t = uint8(ws[j] & tierMask)
			}
		}
		c.step(t)
		switch {
		case c.phase == phaseDone:
			done = append(done, *c)
		case n != k:
			active[n] = *c
			n++
		default:
			n++
		}
	}
	return active[:n], done
}

// appendMatches converts candidates with a non-empty overlap to matches.
func (e *Exact) appendMatches(dst []routing.Match, cs []cand) []routing.Match {
	for _, c := range cs {
		if c.ov.Total() > 0 {
			dst = append(dst, routing.Match{Worker: e.workers[c.slot].w, Overlap: c.ov})
		}
	}
	return dst
}
