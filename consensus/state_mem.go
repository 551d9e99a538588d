package consensus

import (
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// Session implements State.
func (s *MemState) Session(key string) (*kvrpb.RaftBinding, bool) {
	b, ok := s.sessions[key]
	return b, ok
}

// PutSession implements State.
func (s *MemState) PutSession(b *kvrpb.RaftBinding) { s.sessions[b.Key] = b }

// DeleteSession implements State.
func (s *MemState) DeleteSession(key string) { delete(s.sessions, key) }

// NumSessions implements State.
func (s *MemState) NumSessions() int { return len(s.sessions) }

// Sessions implements State.
func (s *MemState) Sessions(fn func(*kvrpb.RaftBinding) bool) { each(s.sessions, fn) }

// Worker implements State.
func (s *MemState) Worker(id routing.WorkerID) (*kvrpb.RaftWorkerRecord, bool) {
	r, ok := s.workers[id]
	return r, ok
}

// PutWorker implements State.
func (s *MemState) PutWorker(r *kvrpb.RaftWorkerRecord) {
	s.workers[routing.WorkerID(r.GetCard().GetEngineId())] = r
}

// DeleteWorker implements State.
func (s *MemState) DeleteWorker(id routing.WorkerID) { delete(s.workers, id) }

// Workers implements State.
func (s *MemState) Workers(fn func(*kvrpb.RaftWorkerRecord) bool) { each(s.workers, fn) }

// find returns w's state, if any, through the cache.
func (s *MemState) find(w routing.Worker) (*rankState, bool) {
	if s.lastRank != nil && s.last == w {
		return s.lastRank, true
	}
	r, ok := s.ranks[w]
	return r, ok
}

// Cursor implements State.
func (s *MemState) Cursor(w routing.Worker) (uint64, bool) {
	r, ok := s.find(w)
	if !ok {
		return 0, false
	}
	return r.cursor, true
}

// rank returns w's state, creating it, and caches it. Only writers call
// it.
func (s *MemState) rank(w routing.Worker) *rankState {
	r, ok := s.find(w)
	if !ok {
		r = &rankState{blocks: make(map[routing.EngineHash]routing.SeqHash), tiers: make(map[routing.SeqHash]uint8)}
		s.ranks[w] = r
	}
	s.last, s.lastRank = w, r
	return r
}

// SetCursor implements State.
func (s *MemState) SetCursor(w routing.Worker, id uint64) { s.rank(w).cursor = id }

// Block implements State.
func (s *MemState) Block(w routing.Worker, eh routing.EngineHash) (routing.SeqHash, bool) {
	r, ok := s.find(w)
	if !ok {
		return 0, false
	}
	seq, ok := r.blocks[eh]
	return seq, ok
}

// PutBlock implements State.
func (s *MemState) PutBlock(w routing.Worker, eh routing.EngineHash, seq routing.SeqHash) {
	s.rank(w).blocks[eh] = seq
}

// DeleteBlock implements State.
func (s *MemState) DeleteBlock(w routing.Worker, eh routing.EngineHash) {
	if r, ok := s.find(w); ok {
		delete(r.blocks, eh)
	}
}

// Tiers implements State.
func (s *MemState) Tiers(w routing.Worker, seq routing.SeqHash) uint8 {
	if r, ok := s.find(w); ok {
		return r.tiers[seq]
	}
	return 0
}

// SetTiers implements State.
func (s *MemState) SetTiers(w routing.Worker, seq routing.SeqHash, tiers uint8) {
	if tiers == 0 {
		if r, ok := s.find(w); ok {
			delete(r.tiers, seq)
		}
		return
	}
	s.rank(w).tiers[seq] = tiers
}

// ClearRank implements State.
func (s *MemState) ClearRank(w routing.Worker) {
	if r, ok := s.find(w); ok {
		clear(r.blocks)
		clear(r.tiers)
	}
}

// DropRank implements State.
func (s *MemState) DropRank(w routing.Worker) {
	delete(s.ranks, w)
	if s.last == w {
		s.lastRank = nil
	}
}

// Ranks implements State.
func (s *MemState) Ranks(fn func(routing.Worker, uint64) bool) {
	for w, r := range s.ranks {
		if !fn(w, r.cursor) {
			return
		}
	}
}

// Blocks implements State.
func (s *MemState) Blocks(w routing.Worker, fn func(routing.EngineHash, routing.SeqHash) bool) {
	r, ok := s.ranks[w]
	if !ok {
		return
	}
	for eh, seq := range r.blocks {
		if !fn(eh, seq) {
			return
		}
	}
}

// Request implements State.
func (s *MemState) Request(id string) (*kvrpb.RaftResult, bool) {
	r, ok := s.reqs[id]
	return r, ok
}

// RememberRequest implements State. The order slice is compacted when its
// dead head grows past the live part, so memory stays O(max).
func (s *MemState) RememberRequest(id string, r *kvrpb.RaftResult, max int) {
	if _, ok := s.reqs[id]; ok {
		return
	}
	s.reqs[id] = proto.CloneOf(r)
	s.order = append(s.order, id)
	for len(s.order)-s.head > max {
		delete(s.reqs, s.order[s.head])
		s.order[s.head] = ""
		s.head++
	}
	if s.head > len(s.order)/2 {
		s.order = append([]string(nil), s.order[s.head:]...)
		s.head = 0
	}
}

// Requests implements State.
func (s *MemState) Requests(fn func(string, *kvrpb.RaftResult) bool) {
	for _, id := range s.order[s.head:] {
		if !fn(id, s.reqs[id]) {
			return
		}
	}
}

// each calls fn for every value of m until fn returns false.
func each[K comparable, V any](m map[K]V, fn func(V) bool) {
	for _, v := range m {
		if !fn(v) {
			return
		}
	}
}
