package load

import (
	"math/rand/v2"

	"github.com/kvrouter/kvrouter/routing"
)

// minRefSlots is the smallest reference table: 256 slots, 4 KiB, enough
// for a 128-block prompt without growing.
const minRefSlots = 256

// refSlot is one slot of a refTable; a zero count marks it empty.
type refSlot struct {
	hash routing.SeqHash
	n    int32
}

// refTable counts, per prompt block hash, the active requests of one
// worker that hold the block. It replaces a Go map because booking and
// freeing a long prompt touches every block: at 12,288 tokens that is 192
// increments and 192 decrements per request, and a flat table with linear
// probing does each in a few nanoseconds where a map insert and delete
// cost tens. Deletion shifts later entries back (no tombstones), so a table
// whose requests were all freed is empty, and reusing it (Tracker.spares)
// costs nothing.
//
// The probe position mixes the hash with a per-table seed. Sequence hashes
// are public functions of the prompt, so without the seed a client could
// choose prompts whose blocks collide and make every operation scan the
// table; the seed only places entries and never changes a count, so the
// tracker's results stay deterministic.
type refTable struct {
	slots []refSlot
	used  int
	seed  uint64
	// peak is the most entries the table has held.
	peak int
}

// newRefTable returns an empty table sized for n entries.
func newRefTable(n int) *refTable {
	size := minRefSlots
	for size < 2*n {
		size *= 2
	}
	return &refTable{slots: make([]refSlot, size), seed: rand.Uint64()}
}

// home is h's preferred slot.
func (t *refTable) home(h routing.SeqHash) int {
	x := uint64(h) ^ t.seed
	x = (x ^ x>>33) * 0xff51afd7ed558ccd
	x = (x ^ x>>33) * 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return int(x & uint64(len(t.slots)-1))
}

// find returns h's slot, or the empty slot where it would go.
func (t *refTable) find(h routing.SeqHash) int {
	mask := len(t.slots) - 1
	i := t.home(h)
	for t.slots[i].n != 0 && t.slots[i].hash != h {
		i = (i + 1) & mask
	}
	return i
}

// count returns how many active requests hold h.
func (t *refTable) count(h routing.SeqHash) int32 {
	return t.slots[t.find(h)].n
}

// inc adds a holder of h and reports whether h was not held before.
func (t *refTable) inc(h routing.SeqHash) bool {
	i := t.find(h)
	if t.slots[i].n != 0 {
		t.slots[i].n++
		return false
	}
	if 2*(t.used+1) > len(t.slots) {
		t.grow()
		i = t.find(h)
	}
	t.slots[i] = refSlot{hash: h, n: 1}
	t.used++
	t.peak = max(t.peak, t.used)
	return true
}

// dec removes a holder of h and reports whether h is no longer held. An
// h that is not held is left alone.
func (t *refTable) dec(h routing.SeqHash) bool {
	i := t.find(h)
	switch t.slots[i].n {
	case 0:
		return false
	case 1:
		t.remove(i)
		return true
	}
	t.slots[i].n--
	return false
}

// remove empties slot i and moves back every later entry of its probe run
// that may now sit closer to its home slot, so that lookups never need a
// tombstone.
func (t *refTable) remove(i int) {
	mask := len(t.slots) - 1
	for j := (i + 1) & mask; t.slots[j].n != 0; j = (j + 1) & mask {
		// The entry at j may fill the hole at i unless its home lies
		// cyclically in (i, j].
		if k := t.home(t.slots[j].hash); (j-k)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = refSlot{}
	t.used--
}

// grow doubles the table and re-inserts every entry.
func (t *refTable) grow() {
	old := t.slots
	t.slots = make([]refSlot, 2*len(old))
	for _, s := range old {
		if s.n != 0 {
			t.slots[t.find(s.hash)] = s
		}
	}
}

// len returns the number of distinct blocks held.
func (t *refTable) len() int { return t.used }
