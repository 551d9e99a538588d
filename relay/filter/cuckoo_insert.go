package filter

import (
	"fmt"

	"github.com/kvrouter/kvrouter/routing"
)

// Insert adds one fingerprint for h. Inserting the same block twice stores
// two copies (the filter is a multiset), which is why callers keep exact
// reference counts in front of it. When the eviction walk exceeds MaxKicks,
// Insert restores every bucket it touched and returns ErrFull: a failed
// insert leaves the filter exactly as it was.
func (c *Cuckoo) Insert(h routing.SeqHash) error {
	fp, i := c.addr.locate(h)
	j := c.addr.alt(i, fp)
	if c.place(i, fp) || c.place(j, fp) || c.moveAside(i, c.bucket(i), fp) || c.moveAside(j, c.bucket(j), fp) {
		c.count++
		return nil
	}
	return c.kick(i, fp)
}

// place puts fp into the lowest empty lane of bucket i, if there is one.
// It is the write of nearly every insert, so the compact layout has a
// flattened version.
func (c *Cuckoo) place(i uint64, fp uint16) bool {
	if c.packed != nil {
		return c.placePacked(i, fp)
	}
	return c.placeIn(i, c.words[i], fp)
}

// placeIn is place for a caller that already holds bucket i's word w.
func (c *Cuckoo) placeIn(i, w uint64, fp uint16) bool {
	m := zeroLanes(w)
	if m == 0 {
		return false
	}
	c.set(i, w|uint64(fp)<<laneShift(m))
	return true
}

// moveAside makes room for fp in full bucket i (holding word w) by one
// look-ahead: it finds a fingerprint of w whose alternate bucket has an
// empty lane, moves it there and puts fp in its lane. The four alternates
// are chosen by w alone, so their loads do not wait on each other and their
// cache misses overlap, where each step of a random walk waits for the
// previous one. Near the producer's 95% load a plain random walk takes
// seven steps per eviction on average (900,000 dependent bucket reads to
// fill a 2^18-bucket filter); looking ahead before the first step and at
// every step cuts that several-fold, and most evictions end in two writes.
func (c *Cuckoo) moveAside(i, w uint64, fp uint16) bool {
	for s := uint(0); s < 64; s += laneBits {
		v := uint16(w >> s)
		a := c.addr.alt(i, v)
		if dst := c.bucket(a); zeroLanes(dst) != 0 {
			c.placeIn(a, dst, v)
			c.set(i, w&^(0xffff<<s)|uint64(fp)<<s)
			return true
		}
	}
	return false
}

// kick runs the eviction walk from one of fp's two full buckets, chosen at
// random: swap fp with a random victim, move the victim to its alternate
// bucket, and when that is full too, look ahead from it (moveAside) before
// the next swap. Every overwritten image goes to the undo log first; the
// look-ahead's two writes end the walk, so they never need undoing. Each
// step reads and decodes one bucket, the victim's destination, and carries
// its image into the next step.
func (c *Cuckoo) kick(i uint64, fp uint16) error {
	c.undo = c.undo[:0]
	if c.rng.Uint64()&1 == 1 {
		i = c.addr.alt(i, fp)
	}
	im := c.image(i)
	w := c.decode(im)
	for range c.maxKicks {
		c.undo = append(c.undo, undoEntry{bucket: i, image: im})
		s := uint(c.rng.Uint64()&3) * laneBits
		victim := uint16(w >> s)
		c.set(i, w&^(0xffff<<s)|uint64(fp)<<s)
		fp, i = victim, c.addr.alt(i, victim)
		im = c.image(i)
		w = c.decode(im)
		if c.placeIn(i, w, fp) || c.moveAside(i, w, fp) {
			c.count++
			return nil
		}
	}
	c.rollback()
	return fmt.Errorf("%w: no slot after %d kicks at load %.3f", ErrFull, c.maxKicks, c.LoadFactor())
}

// rollback restores the undo log in reverse order, so a bucket touched
// several times ends with the image it had before the first touch.
func (c *Cuckoo) rollback() {
	for k := len(c.undo) - 1; k >= 0; k-- {
		c.store(c.undo[k].bucket, c.undo[k].image)
	}
	c.undo = c.undo[:0]
}
