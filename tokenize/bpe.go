package tokenize

import (
	"sync"
)

// bpe is a byte-level BPE model. Its vocabulary is keyed by the raw bytes
// of each token: tokenizer.json spells tokens in the ByteLevel alphabet (a
// printable character per byte), and decoding that spelling once at load
// time spares the encoder from mapping every input byte to it.
type bpe struct {
	vocab        map[string]uint32
	merges       map[uint64]uint64 // left<<32|right → rank<<32|merged
	byteID       [256]uint32
	hasByte      [256]bool
	ignoreMerges bool // a word found whole in the vocabulary is one token
	// whole marks the tokens that BPE on their own bytes yields as a single
	// token. When ignoreMerges is off, a word found in the vocabulary may
	// only skip the merges if its token is marked, because the merge order
	// can split a word that the vocabulary also lists whole.
	whole []bool
	unk   uint32
	isUnk bool
	cache wordCache
}

func pairKey(a, b uint32) uint64 { return uint64(a)<<32 | uint64(b) }

// merge returns the rank and result of merging a then b.
func (m *bpe) merge(a, b uint32) (rank uint32, id uint32, ok bool) {
	v, ok := m.merges[pairKey(a, b)]
	return uint32(v >> 32), uint32(v), ok
}

// encodeWord appends the tokens of one pre-tokenized piece.
func (m *bpe) encodeWord(w string, sc *scratch, dst []uint32) []uint32 {
	if id, ok := m.vocab[w]; ok && (m.ignoreMerges || m.whole[id]) {
		return append(dst, id)
	}
	if ids, ok := m.cache.get(w); ok {
		return append(dst, ids...)
	}
	start := len(dst)
	dst = m.mergeWord(w, sc, dst)
	m.cache.put(w, dst[start:])
	return dst
}

// mergeWord runs the merges on w's bytes: the pair of adjacent symbols with
// the lowest rank merges first, the leftmost among equals, until no
// adjacent pair has a rule. Short words scan for that pair; long ones keep
// a heap, so that a pathological word (a megabyte of spaces) costs
// n log n and not n².
func (m *bpe) mergeWord(w string, sc *scratch, dst []uint32) []uint32 {
	syms := sc.syms[:0]
	for i := 0; i < len(w); i++ {
		switch b := w[i]; {
		case m.hasByte[b]:
			syms = append(syms, m.byteID[b])
		case m.isUnk:
			syms = append(syms, m.unk)
		}
	}
	if len(syms) > 48 {
		syms = m.mergeHeap(syms, sc)
	} else {
		syms = m.mergeScan(syms)
	}
	sc.syms = syms
	return append(dst, syms...)
}

// mergeScan merges in place by repeated scans for the best pair.
func (m *bpe) mergeScan(syms []uint32) []uint32 {
	for len(syms) > 1 {
		best, bestRank, bestID := -1, ^uint32(0), uint32(0)
		for i := 0; i+1 < len(syms); i++ {
			if r, id, ok := m.merge(syms[i], syms[i+1]); ok && r < bestRank {
				best, bestRank, bestID = i, r, id
			}
		}
		if best < 0 {
			break
		}
		syms[best] = bestID
		syms = append(syms[:best+1], syms[best+2:]...)
	}
	return syms
}

// wordCache remembers the tokens of words that needed merges. It is
// sharded so that concurrent encoders rarely meet on a lock, and bounded:
// a full shard is emptied rather than tracked for recency, which keeps a
// hit to one read lock and one map lookup.
type wordCache struct {
	shards [cacheShards]cacheShard
}

const (
	cacheShards      = 32
	cacheShardWords  = 4096 // 131,072 words in all
	cacheMaxWordSize = 256  // longer words are not worth the memory
)

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]uint32
}

func shardOf(w string) int {
	h := uint32(2166136261)
	for i := 0; i < len(w) && i < 16; i++ {
		h = (h ^ uint32(w[i])) * 16777619
	}
	return int(h^uint32(len(w))) % cacheShards
}

func (c *wordCache) get(w string) ([]uint32, bool) {
	if len(w) > cacheMaxWordSize {
		return nil, false
	}
	s := &c.shards[shardOf(w)]
	s.mu.RLock()
	ids, ok := s.m[w]
	s.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []uint32) {
	if len(w) > cacheMaxWordSize {
		return
	}
	s := &c.shards[shardOf(w)]
	cp := append([]uint32(nil), ids...)
	s.mu.Lock()
	if s.m == nil || len(s.m) >= cacheShardWords {
		s.m = make(map[string][]uint32, 64)
	}
	s.m[string([]byte(w))] = cp
	s.mu.Unlock()
}
