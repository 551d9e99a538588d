package consensus

import (
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// State is the FSM's tables: what the FSM reads and writes while it
// applies entries. MemState is the in-memory implementation; a persistent
// store implements the same methods over its key layout.
//
// Values passed in and out are owned by the callee and the caller
// respectively: implementations copy what they keep and return copies or
// values the caller will not mutate. Iteration order is unspecified; the
// FSM sorts where order matters (snapshots, hashes, multi-key deletes).
//
// Concurrency: implementations need not be safe for concurrent use. The
// FSM calls them from its apply goroutine under its write lock, and reads
// under its read lock.
type State interface {
	// Session returns the binding of key.
	Session(key string) (*kvrpb.RaftBinding, bool)
	// PutSession stores b under b.Key.
	PutSession(b *kvrpb.RaftBinding)
	// DeleteSession drops the binding of key, if any.
	DeleteSession(key string)
	// NumSessions returns the number of bindings.
	NumSessions() int
	// Sessions calls fn for every binding until fn returns false.
	Sessions(fn func(b *kvrpb.RaftBinding) bool)

	// Worker returns the record of an engine.
	Worker(id routing.WorkerID) (*kvrpb.RaftWorkerRecord, bool)
	// PutWorker stores r under r.Card.EngineId.
	PutWorker(r *kvrpb.RaftWorkerRecord)
	// DeleteWorker drops an engine's record, if any.
	DeleteWorker(id routing.WorkerID)
	// Workers calls fn for every record until fn returns false.
	Workers(fn func(r *kvrpb.RaftWorkerRecord) bool)

	// Cursor returns the id of the last KV event applied for a rank.
	Cursor(w routing.Worker) (uint64, bool)
	// SetCursor sets a rank's cursor, creating the rank.
	SetCursor(w routing.Worker, id uint64)
	// Block returns the sequence hash a rank's engine block id names.
	Block(w routing.Worker, eh routing.EngineHash) (routing.SeqHash, bool)
	// PutBlock maps a rank's engine block id to a sequence hash.
	PutBlock(w routing.Worker, eh routing.EngineHash, seq routing.SeqHash)
	// DeleteBlock forgets a rank's engine block id.
	DeleteBlock(w routing.Worker, eh routing.EngineHash)
	// Tiers returns the tier bits on which a rank holds seq.
	Tiers(w routing.Worker, seq routing.SeqHash) uint8
	// SetTiers sets them; 0 forgets seq for the rank.
	SetTiers(w routing.Worker, seq routing.SeqHash, tiers uint8)
	// ClearRank drops a rank's blocks and keeps its cursor.
	ClearRank(w routing.Worker)
	// DropRank drops a rank entirely, cursor included.
	DropRank(w routing.Worker)
	// Ranks calls fn for every rank with state until fn returns false.
	Ranks(fn func(w routing.Worker, cursor uint64) bool)
	// Blocks calls fn for every engine block id of a rank.
	Blocks(w routing.Worker, fn func(eh routing.EngineHash, seq routing.SeqHash) bool)

	// Request returns the remembered result of a request id.
	Request(id string) (*kvrpb.RaftResult, bool)
	// RememberRequest records a request id's result and, beyond max
	// remembered ids, forgets the oldest.
	RememberRequest(id string, r *kvrpb.RaftResult, max int)
	// Requests calls fn for the remembered ids, oldest first.
	Requests(fn func(id string, r *kvrpb.RaftResult) bool)

	// The runtime busy thresholds (thresholds.go).
	thresholdTable
	// The worker-set incumbents (incumbents.go).
	incumbentTable

	// Reset drops every table.
	Reset()
}

// MemState is the in-memory State.
type MemState struct {
	sessions map[string]*kvrpb.RaftBinding
	workers  map[routing.WorkerID]*kvrpb.RaftWorkerRecord
	ranks    map[routing.Worker]*rankState
	reqs     map[string]*kvrpb.RaftResult
	// thresholds are the runtime busy thresholds by model.
	thresholds map[string]*kvrpb.RaftThresholds
	// incumbents are the worker-set incumbents by IncumbentKey.
	incumbents map[string]*kvrpb.RaftIncumbent
	// order holds the remembered ids oldest first, from head on.
	order []string
	head  int
	// last and lastRank cache the rank written last: a KV-events entry
	// applies runs of one rank's events, each touching the rank's tables
	// several times per block, and hashing the Worker key for every
	// touch cost more than the table operations themselves. Only writers
	// set the cache, so readers under the FSM's read lock never write.
	last     routing.Worker
	lastRank *rankState
}

// rankState is one rank's cursor and blocks.
type rankState struct {
	cursor uint64
	blocks map[routing.EngineHash]routing.SeqHash
	tiers  map[routing.SeqHash]uint8
}

var _ State = (*MemState)(nil)

// NewMemState returns empty tables.
func NewMemState() *MemState {
	s := &MemState{}
	s.Reset()
	return s
}

// Reset implements State.
func (s *MemState) Reset() {
	s.sessions = make(map[string]*kvrpb.RaftBinding)
	s.workers = make(map[routing.WorkerID]*kvrpb.RaftWorkerRecord)
	s.ranks = make(map[routing.Worker]*rankState)
	s.reqs = make(map[string]*kvrpb.RaftResult)
	s.thresholds = make(map[string]*kvrpb.RaftThresholds)
	s.incumbents = make(map[string]*kvrpb.RaftIncumbent)
	s.order, s.head = nil, 0
	s.lastRank = nil
}
