package consensus

import (
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/store"
)

// loadSessions copies the session table into memory.
func (s *StoreState) loadSessions() error {
	return s.s.ScanSessions(func(ss store.Session) error {
		s.MemState.PutSession(fromStoreSession(ss))
		return nil
	})
}

// loadWorkers decodes the worker table into memory.
func (s *StoreState) loadWorkers() error {
	return s.s.ScanWorkers(func(c store.WorkerCard) error { return unmarshalTo(c.Card, s.MemState.PutWorker) })
}

// unmarshalTo decodes v into a new message of type P and hands it to put.
func unmarshalTo[M any, P interface {
	*M
	proto.Message
}](v []byte, put func(P)) error {
	m := P(new(M))
	if err := proto.Unmarshal(v, m); err != nil {
		return err
	}
	put(m)
	return nil
}

// loadRanks copies the cursor, engine block and ownership tables.
func (s *StoreState) loadRanks() error {
	err := s.s.ScanCursors(func(c store.Cursor) error {
		s.MemState.SetCursor(routing.Worker{ID: routing.WorkerID(c.Worker), Rank: c.Rank}, c.EventID)
		return nil
	})
	if err != nil {
		return err
	}
	err = s.s.ScanEngineBlocks(func(e store.EngineBlock) error {
		w := routing.Worker{ID: routing.WorkerID(e.Worker), Rank: e.Rank}
		s.MemState.PutBlock(w, routing.EngineHash(e.EngineHash), routing.SeqHash(e.Seq))
		return nil
	})
	if err != nil {
		return err
	}
	return s.s.ScanOwners(func(o store.Owner) error {
		w := routing.Worker{ID: routing.WorkerID(o.Worker), Rank: o.Rank}
		s.MemState.SetTiers(w, routing.SeqHash(o.Hash), uint8(o.Tiers))
		return nil
	})
}

// loadRequests copies the request FIFO, oldest first, and continues its
// numbering after the newest row.
func (s *StoreState) loadRequests() error {
	return s.s.ScanRequests(func(r store.Request) error {
		res := &kvrpb.RaftResult{}
		if err := proto.Unmarshal(r.Result, res); err != nil {
			return err
		}
		s.MemState.RememberRequest(r.ID, res, RememberedRequests)
		s.pushReq(storedReq{seq: r.Seq, id: r.ID})
		return nil
	})
}
