package consensus

import (
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/store"
)

// ensureCursor writes a zero cursor row for a rank the MemState is about
// to create, so a rank with blocks but no applied event id survives a
// reload (MemState lists it in Ranks, and so in the state hash).
func (s *StoreState) ensureCursor(bt *store.Batch, w routing.Worker) {
	if _, ok := s.MemState.Cursor(w); !ok {
		bt.PutCursor(uint64(w.ID), w.Rank, 0)
	}
}

// SetCursor implements State.
func (s *StoreState) SetCursor(w routing.Worker, id uint64) {
	s.MemState.SetCursor(w, id)
	s.mirror(func(bt *store.Batch) { bt.PutCursor(uint64(w.ID), w.Rank, id) })
}

// PutBlock implements State.
func (s *StoreState) PutBlock(w routing.Worker, eh routing.EngineHash, seq routing.SeqHash) {
	s.mirror(func(bt *store.Batch) {
		s.ensureCursor(bt, w)
		bt.PutEngineBlock(uint64(w.ID), w.Rank, uint64(eh), uint64(seq))
	})
	s.MemState.PutBlock(w, eh, seq)
}

// DeleteBlock implements State.
func (s *StoreState) DeleteBlock(w routing.Worker, eh routing.EngineHash) {
	s.MemState.DeleteBlock(w, eh)
	s.mirror(func(bt *store.Batch) { bt.DeleteEngineBlock(uint64(w.ID), w.Rank, uint64(eh)) })
}

// SetTiers implements State.
func (s *StoreState) SetTiers(w routing.Worker, seq routing.SeqHash, tiers uint8) {
	s.mirror(func(bt *store.Batch) {
		if tiers == 0 {
			bt.DeleteOwner(uint64(w.ID), w.Rank, uint64(seq))
		} else {
			s.ensureCursor(bt, w)
			bt.PutOwner(uint64(w.ID), w.Rank, uint64(seq), store.TierMask(tiers))
		}
	})
	s.MemState.SetTiers(w, seq, tiers)
}

// ClearRank implements State.
func (s *StoreState) ClearRank(w routing.Worker) {
	s.MemState.ClearRank(w)
	s.mirror(func(bt *store.Batch) { clearRankRows(bt, w) })
}

// DropRank implements State.
func (s *StoreState) DropRank(w routing.Worker) {
	s.MemState.DropRank(w)
	s.mirror(func(bt *store.Batch) { dropRankRows(bt, w) })
}

// clearRankRows deletes a rank's ownership and engine block rows.
func clearRankRows(bt *store.Batch, w routing.Worker) {
	bt.DeleteOwnersOfRank(uint64(w.ID), w.Rank)
	bt.DeleteEngineBlocksOfRank(uint64(w.ID), w.Rank)
}

// dropRankRows deletes every row of a rank, its cursor included.
func dropRankRows(bt *store.Batch, w routing.Worker) {
	clearRankRows(bt, w)
	bt.DeleteCursor(uint64(w.ID), w.Rank)
}

// RememberRequest implements State. The store's FIFO gets the next
// sequence number; ids the MemState evicted are deleted from it, oldest
// first, so both FIFOs hold the same ids.
func (s *StoreState) RememberRequest(id string, r *kvrpb.RaftResult, max int) {
	if _, ok := s.MemState.Request(id); ok {
		return
	}
	s.MemState.RememberRequest(id, r, max)
	s.mirrorProto(r, func(bt *store.Batch, res []byte) {
		bt.PutRequest(s.nextSeq, id, res)
		s.pushReq(storedReq{seq: s.nextSeq, id: id})
		for s.head < len(s.fifo) {
			old := s.fifo[s.head]
			if _, ok := s.MemState.Request(old.id); ok {
				break
			}
			bt.DeleteRequest(old.seq, old.id)
			s.head++
		}
		if s.head > len(s.fifo)/2 {
			s.fifo = append([]storedReq(nil), s.fifo[s.head:]...)
			s.head = 0
		}
	})
}

// pushReq appends to the FIFO mirror and advances the sequence.
func (s *StoreState) pushReq(r storedReq) {
	s.fifo = append(s.fifo, r)
	s.nextSeq = r.seq + 1
}

// Reset implements State. The store's rows are deleted one table entry
// at a time from the MemState's contents, which mirror them exactly.
func (s *StoreState) Reset() {
	if bt := s.batch(); bt != nil && s.MemState != nil {
		s.MemState.Sessions(func(b *kvrpb.RaftBinding) bool { bt.DeleteSession(b.Key); return true })
		s.MemState.Workers(func(r *kvrpb.RaftWorkerRecord) bool {
			bt.DeleteWorker(r.GetCard().GetEngineId())
			return true
		})
		s.MemState.Ranks(func(w routing.Worker, _ uint64) bool { dropRankRows(bt, w); return true })
		for _, r := range s.fifo[s.head:] {
			bt.DeleteRequest(r.seq, r.id)
		}
		s.resetThresholds(bt)
		s.resetIncumbents(bt)
	}
	s.fifo, s.head = nil, 0
	s.MemState.Reset()
}
