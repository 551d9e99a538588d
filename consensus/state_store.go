package consensus

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/store"
)

// durableState is a State whose writes become durable when the FSM
// commits them with the raft index and term of the last entry applied.
// The FSM checks for it after every Apply, ApplyBatch and Restore, and
// skips entries at or below Applied (they are already in the state).
type durableState interface {
	State
	// Commit makes every write since the last Commit durable at index.
	Commit(index, term uint64) error
	// Applied returns the index of the last committed entry.
	Applied() uint64
	// AppliedTerm returns the term of the last committed entry.
	AppliedTerm() uint64
}

// StoreState is a State backed by store.FSMStore. A MemState holds the
// tables for reads (the FSM reads on every apply, and the store's reads
// cost a Pebble lookup each); every write is applied to the MemState and
// mirrored into a store.Batch, which Commit writes with the entry's index
// and term. On open the store's tables are loaded into the MemState.
//
// After a store error (a refused write or a failed commit) StoreState
// stops writing to the store, whose applied index then stays at the last
// good commit and covers exactly the data it holds; the in-memory tables
// carry on and Err reports the error. A restart then replays the raft log
// from that index, or restores the latest snapshot when the log no longer
// reaches back.
type StoreState struct {
	*MemState
	s       *store.FSMStore
	b       *store.Batch
	fifo    []storedReq
	head    int
	nextSeq uint64
	applied uint64
	term    uint64
	err     error
}

// storedReq is one remembered request's FIFO sequence and id.
type storedReq struct {
	seq uint64
	id  string
}

var _ durableState = (*StoreState)(nil)

// OpenStoreState loads every table of s into memory. The caller keeps
// ownership of s and closes it after the node that uses the state.
func OpenStoreState(s *store.FSMStore) (*StoreState, error) {
	idx, term, err := s.Applied()
	if err != nil {
		return nil, fmt.Errorf("consensus: opening store state: %w", err)
	}
	st := &StoreState{MemState: NewMemState(), s: s, applied: idx, term: term, nextSeq: 1}
	for _, load := range []func() error{st.loadSessions, st.loadWorkers, st.loadRanks, st.loadRequests, st.loadThresholds, st.loadIncumbents} {
		if err := load(); err != nil {
			return nil, fmt.Errorf("consensus: opening store state: %w", err)
		}
	}
	return st, nil
}

// Applied implements durableState.
func (s *StoreState) Applied() uint64 { return s.applied }

// AppliedTerm implements durableState.
func (s *StoreState) AppliedTerm() uint64 { return s.term }

// Err returns the store error that stopped mirroring, or nil.
func (s *StoreState) Err() error { return s.err }

// batch returns the open batch, starting one; nil once mirroring stopped.
func (s *StoreState) batch() *store.Batch {
	if s.err != nil {
		return nil
	}
	if s.b == nil {
		s.b = s.s.NewBatch()
	}
	return s.b
}

// Commit implements durableState. An index at or below the applied one
// (a halted FSM re-reporting its index) commits nothing.
func (s *StoreState) Commit(index, term uint64) error {
	if s.err != nil {
		return s.err
	}
	if index <= s.applied {
		return nil
	}
	b := s.batch()
	if err := b.Commit(index, term); err != nil {
		if errors.Is(err, store.ErrDiskFull) {
			// Nothing was written and the batch stays open: the next
			// entries' writes join it and commit at their index once
			// space returns, so the store never skips an entry.
			return err
		}
		s.b = nil
		s.err = fmt.Errorf("consensus: committing state at %d: %w", index, err)
		return s.err
	}
	s.b = nil
	s.applied, s.term = index, term
	return nil
}

// Close abandons uncommitted writes. It does not close the store.
func (s *StoreState) Close() {
	if s.b != nil {
		s.b.Close()
		s.b = nil
	}
}

// mirror hands fn the open batch, unless mirroring stopped.
func (s *StoreState) mirror(fn func(bt *store.Batch)) {
	if bt := s.batch(); bt != nil {
		fn(bt)
	}
}

// mirrorProto hands put the open batch and m's deterministic protobuf
// encoding, unless mirroring stopped; a failed encoding stops it.
func (s *StoreState) mirrorProto(m proto.Message, put func(bt *store.Batch, v []byte)) {
	bt := s.batch()
	if bt == nil {
		return
	}
	v, err := deterministic.Marshal(m)
	if err != nil {
		s.fail(err)
		return
	}
	put(bt, v)
}

// PutSession implements State.
func (s *StoreState) PutSession(b *kvrpb.RaftBinding) {
	s.MemState.PutSession(b)
	s.mirror(func(bt *store.Batch) { bt.PutSession(toStoreSession(b)) })
}

// DeleteSession implements State.
func (s *StoreState) DeleteSession(key string) {
	s.MemState.DeleteSession(key)
	s.mirror(func(bt *store.Batch) { bt.DeleteSession(key) })
}

// PutWorker implements State. The record is stored as its deterministic
// protobuf encoding.
func (s *StoreState) PutWorker(r *kvrpb.RaftWorkerRecord) {
	s.MemState.PutWorker(r)
	s.mirrorProto(r, func(bt *store.Batch, card []byte) { bt.PutWorker(r.GetCard().GetEngineId(), card) })
}

// DeleteWorker implements State.
func (s *StoreState) DeleteWorker(id routing.WorkerID) {
	s.MemState.DeleteWorker(id)
	s.mirror(func(bt *store.Batch) { bt.DeleteWorker(uint64(id)) })
}

// fail stops mirroring after err, abandoning the open batch.
func (s *StoreState) fail(err error) {
	s.Close()
	if s.err == nil {
		s.err = fmt.Errorf("consensus: mirroring state: %w", err)
	}
}

// toStoreSession converts a binding; its version is the raft index of
// the bind that created it, which is also its fence.
func toStoreSession(b *kvrpb.RaftBinding) store.Session {
	return store.Session{Key: b.Key, Worker: b.WorkerId, Rank: b.Rank, DC: b.Dc, Version: b.Version,
		Fence: b.Version, IdleDeadlineNanos: b.IdleDeadlineUnixNanos, Parent: b.ParentKey, Active: b.Active}
}

// fromStoreSession is toStoreSession's inverse.
func fromStoreSession(s store.Session) *kvrpb.RaftBinding {
	return &kvrpb.RaftBinding{Key: s.Key, ParentKey: s.Parent, WorkerId: s.Worker, Rank: s.Rank, Dc: s.DC,
		Version: s.Version, IdleDeadlineUnixNanos: s.IdleDeadlineNanos, Active: s.Active}
}
