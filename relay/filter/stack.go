package filter

import (
	"fmt"
	"math/bits"

	"github.com/kvrouter/kvrouter/routing"
)

// MaxStackWidth is the most filters a Stack holds: a row of 16 buckets is
// two cache lines.
const MaxStackWidth = 16

// Stack is a read replica of up to MaxStackWidth cuckoo filters of one
// geometry (kind, seed and bucket count), stored transposed: row i holds
// bucket i of every member, side by side. Filters of one geometry place a
// block in the same two buckets with the same fingerprint, so one block
// is tested in every member by reading its two rows (Hits), where
// the members' own filters take two cache lines each. That is what a
// search across remote pools at one depth needs: with 16 members a probe
// of all of them reads 4 lines instead of 32.
//
// Rows hold each bucket's logical word (four 16-bit lanes, see
// layout.go), so both cuckoo kinds stack alike. A Stack does not validate
// what it is given: its owner keeps each column equal to its filter by
// loading the whole filter (Load) and then every delta the filter accepts
// (Apply). A Stack doubles the memory of the filters it mirrors.
//
// A Stack is not safe for concurrent use; like a Cuckoo, its read-only
// methods may run concurrently while nothing writes it.
type Stack struct {
	kind  Kind
	addr  addressing
	width int
	rows  []uint64 // bucket i of column k is rows[i*width+k]
}

// NewStack returns an empty stack of width columns (1..MaxStackWidth,
// rounded up to a power of two) for filters of like's geometry.
func NewStack(like *Cuckoo, width int) (*Stack, error) {
	if width < 1 || width > MaxStackWidth {
		return nil, fmt.Errorf("filter: stack width %d out of range 1..%d", width, MaxStackWidth)
	}
	w := 1
	for w < width {
		w <<= 1
	}
	return &Stack{kind: like.kind, addr: like.addr, width: w, rows: make([]uint64, uint64(w)*(like.addr.mask+1))}, nil
}

// Width returns the number of columns.
func (s *Stack) Width() int { return s.width }

// Fits reports whether c has the stack's geometry.
func (s *Stack) Fits(c *Cuckoo) bool {
	return c != nil && c.kind == s.kind && c.addr == s.addr
}

// SameGeometry reports whether c and o have one kind, seed and bucket
// count, so that a Stack holds both and a delta of one applies to the
// other.
func (c *Cuckoo) SameGeometry(o *Cuckoo) bool {
	return c.kind == o.kind && c.addr == o.addr
}

// Load copies every bucket of c, which must fit the stack, into column k.
func (s *Stack) Load(k int, c *Cuckoo) { s.LoadRange(k, c, 0, s.addr.mask+1) }

// LoadRange copies buckets [from, to) of c, which must fit the stack,
// into column k, so that a large filter can be loaded in parts.
func (s *Stack) LoadRange(k int, c *Cuckoo, from, to uint64) {
	w := uint64(s.width)
	for i := from; i < to; i++ {
		s.rows[i*w+uint64(k)] = c.bucket(i)
	}
}

// Apply writes the images of d, a delta that the filter of column k has
// just accepted, into the column.
func (s *Stack) Apply(k int, d Delta) {
	w := uint64(s.width)
	for _, im := range d.Images {
		word := im.Word
		if s.kind == KindCuckooCompact {
			word = unpackBucket(im.Word & imageMask)
		}
		s.rows[uint64(im.Index)*w+uint64(k)] = word
	}
}

// Contains reports whether h is probably present in column k, as the
// column's filter's Contains would.
func (s *Stack) Contains(k int, h routing.SeqHash) bool {
	fp, i := s.addr.locate(h)
	w := uint64(s.width)
	if matchLanes(s.rows[i*w+uint64(k)], fp) != 0 {
		return true
	}
	return matchLanes(s.rows[s.addr.alt(i, fp)*w+uint64(k)], fp) != 0
}

// StackProbe is one block's lookup in every column of a Stack, between
// LocateInto and Hits: where its two rows start, and its fingerprint. It
// holds no pointer, so writing one costs no write barrier.
type StackProbe struct {
	rows [2]uint64 // the index in Stack.rows of the block's two rows
	fp   uint16
	// touch holds what Hits' read loop loaded.
	touch uint64
}

// LocateInto sets *p to h's lookup in s.
func (s *Stack) LocateInto(p *StackProbe, h routing.SeqHash) {
	fp, i := s.addr.locate(h)
	j := s.addr.alt(i, fp)
	w := uint64(s.width)
	p.fp = fp
	p.rows = [2]uint64{i * w, j * w}
}

// Hits tests each probe's block in the columns masks holds for it: on
// entry masks[n] is the set of columns asked of ps[n] (bit k for column
// k), on return the columns among those in which the block is probably
// present, as each column's filter's Contains would answer. The probes
// must have been located in s since it was last written. Like HitAll, it
// reads every probe's rows before it matches any, so that their cache
// misses are in flight together, and it reads only the lines of a row (8
// columns each) that hold a column asked for: a search's later rounds ask
// a few lanes at each depth, often of one line. masks must be at least as
// long as ps.
func (s *Stack) Hits(ps []StackProbe, masks []uint32) {
	if len(ps) == 0 {
		return
	}
	masks = masks[:len(ps)]
	w := uint64(s.width)
	if haveRowMatch && w >= 4 {
		// The assembly trusts the probes' rows: check them here.
		var last uint64
		for k := range ps {
			last = max(last, ps[k].rows[0], ps[k].rows[1])
		}
		if last+w > uint64(len(s.rows)) {
			panic("filter: stack probe out of range")
		}
		hitsAVX2(&s.rows[0], &ps[0], len(ps), int(w/4), &masks[0])
		return
	}
	s.hitsWords(ps, masks)
}

// hitsWords is Hits a word at a time, for every machine; len(masks) ==
// len(ps).
func (s *Stack) hitsWords(ps []StackProbe, masks []uint32) {
	w := uint64(s.width)
	for k := range ps {
		// Load a word of both rows from each line (8 columns) that holds
		// a column asked for; the loop does nothing else, so the misses
		// overlap.
		p := &ps[k]
		a, b := s.rows[p.rows[0]:p.rows[0]+w], s.rows[p.rows[1]:p.rows[1]+w]
		p.touch = 0
		for x := uint64(0); x < w; x += 8 {
			if masks[k]>>x&0xff != 0 {
				p.touch ^= a[x] ^ b[x]
			}
		}
	}
	for k := range ps {
		p := &ps[k]
		masks[k] = matchRowsWords(s.rows[p.rows[0]:p.rows[0]+w], s.rows[p.rows[1]:p.rows[1]+w], p.fp, masks[k])
	}
}

// matchRowsWords returns the columns among cols in which a lane of row a
// or b (of one width) is fp.
func matchRowsWords(a, b []uint64, fp uint16, cols uint32) uint32 {
	b = b[:len(a)]
	f := uint64(fp) * lanesLo
	var m uint32
	for rest := cols; rest != 0; rest &= rest - 1 {
		c := bits.TrailingZeros32(rest)
		if c >= len(a) {
			break
		}
		x := zeroLanes(a[c]^f) | zeroLanes(b[c]^f)
		m |= uint32((x|-x)>>63) << c
	}
	return m
}
