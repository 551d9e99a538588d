package tokenize

// mergeHeap is mergeWord for long words: symbols form a linked list, and
// candidate merges wait in a min-heap ordered by rank, then position. A
// candidate whose symbols changed since it was pushed is skipped when it
// surfaces.
func (m *bpe) mergeHeap(syms []uint32, sc *scratch) []uint32 {
	n := len(syms)
	sc.prev = grow(sc.prev, n)
	sc.next = grow(sc.next, n)
	alive := sc.alive[:0]
	for i := 0; i < n; i++ {
		sc.prev[i], sc.next[i] = int32(i-1), int32(i+1)
		alive = append(alive, true)
	}
	sc.alive = alive
	sc.next[n-1] = -1
	h := candHeap(sc.heap[:0])
	for i := 0; i+1 < n; i++ {
		if r, id, ok := m.merge(syms[i], syms[i+1]); ok {
			h.push(cand{rank: r, pos: int32(i), id: id})
		}
	}
	for len(h) > 0 {
		c := h.pop()
		p := c.pos
		nx := sc.next[p]
		if !alive[p] || nx < 0 {
			continue
		}
		if _, id, ok := m.merge(syms[p], syms[nx]); !ok || id != c.id {
			continue
		}
		syms[p] = c.id
		alive[nx] = false
		sc.next[p] = sc.next[nx]
		if nn := sc.next[p]; nn >= 0 {
			sc.prev[nn] = p
			if r, id, ok := m.merge(syms[p], syms[nn]); ok {
				h.push(cand{rank: r, pos: p, id: id})
			}
		}
		if pp := sc.prev[p]; pp >= 0 {
			if r, id, ok := m.merge(syms[pp], syms[p]); ok {
				h.push(cand{rank: r, pos: pp, id: id})
			}
		}
	}
	sc.heap = h
	out := syms[:0]
	for i := int32(0); i >= 0; i = sc.next[i] {
		out = append(out, syms[i])
	}
	return out
}

func grow(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

// cand is a merge waiting in the heap: the pair starting at symbol pos,
// with its rank and the token it would make.
type cand struct {
	rank uint32
	pos  int32
	id   uint32
}

func (a cand) less(b cand) bool {
	return a.rank < b.rank || a.rank == b.rank && a.pos < b.pos
}

// candHeap is a binary min-heap; a typed one, because container/heap would
// box every candidate.
type candHeap []cand

func (h *candHeap) push(c cand) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *candHeap) pop() cand {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, min := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].less(s[min]) {
			min = l
		}
		if r < len(s) && s[r].less(s[min]) {
			min = r
		}
		if min == i {
			break
		}
		s[i], s[min] = s[min], s[i]
		i = min
	}
	*h = s
	return top
}
