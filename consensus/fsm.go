package consensus

import (
	"cmp"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/internal/failpoint"
	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing/index"
)

// RememberedRequests bounds the request ids the FSM remembers for
// idempotent retries. It is part of the replicated behaviour, so it is a
// constant rather than a per-node setting: 4096 ids cover several seconds
// of binds at the commit rates measured for a DC cluster, far longer than
// a client retries.
const RememberedRequests = 4096

// FSM is the replicated state machine of one DC's router cluster. It
// implements raft.FSM and raft.BatchingFSM: entries are decoded, dispatched
// through the command table, and applied to a State and to an in-memory
// exact prefix index that routing reads.
//
// An entry that cannot be decoded halts the FSM (Halted then returns an
// error wrapping ErrHalted): every later entry is answered with that error
// and changes nothing, because applying past it could make nodes diverge.
// A business outcome (a lost compare-and-set, an unknown key) is a
// RaftResult code, never an error.
//
// Concurrency: raft calls Apply, ApplyBatch, Snapshot and Restore from one
// goroutine; the read methods are safe to call concurrently with them.
type FSM struct {
	mu      sync.RWMutex
	st      State
	idx     *index.Exact
	applied uint64
	// published is applied as of the end of the last Apply, ApplyBatch or
	// Restore, for AppliedIndex: read without mu, so that readiness
	// (catchup.go) never waits for an apply in progress, and set only once
	// every effect of the entries up to it is visible, the lock-free
	// tables (thresholds, incumbents) included.
	published atomic.Uint64
	// term is the term of the entry at applied, recorded in snapshots so
	// that a restored durable state commits the snapshot's real term.
	term   uint64
	halted atomic.Pointer[error]
	log    *slog.Logger
	// durable is st when it is a durableState: committed after every
	// apply and restore (fsm_durable.go).
	durable       durableState
	durableFailed bool
	// watch records the ownership changes of every entry (watch_ring.go).
	watch *OwnershipLog
	// metrics counts index errors (nil counts nothing); Deps.Metrics.
	metrics *metrics.Metrics
	// thresholds is the thresholds table as an immutable map, for
	// lock-free reads (thresholds.go).
	thresholds atomic.Pointer[map[string]*kvrpb.RaftThresholds]
	// incumbents is the worker-set incumbents table, for lock-free reads
	// (incumbents.go).
	incumbents atomic.Pointer[Incumbents]
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// NewFSM returns an FSM over st (NewMemState when nil) that also feeds idx
// (a fresh index when nil). A durable st (StoreState) supplies the applied
// index, rebuilds idx from its tables, and is committed after every
// Apply, ApplyBatch and Restore; entries at or below its applied index
// are skipped.
func NewFSM(st State, idx *index.Exact, log *slog.Logger) *FSM {
	if st == nil {
		st = NewMemState()
	}
	if idx == nil {
		idx = index.NewExact()
	}
	f := &FSM{st: st, idx: idx, log: cmp.Or(log, slog.New(slog.DiscardHandler))}
	if d, ok := st.(durableState); ok {
		f.openDurable(d)
	}
	f.refreshThresholds()
	f.refreshIncumbents()
	f.published.Store(f.applied)
	f.watch = newOwnershipLog(f.applied) // Ownership change stream: covers what is applied from here on.
	return f
}

// Apply implements raft.FSM.
func (f *FSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.applyLocked(l)
	f.watch.seal(l.Index) // Ownership change stream: one batch per entry that changed ownership.
	f.commitDurable(l.Term)
	f.published.Store(f.applied)
	return r
}

// ApplyBatch implements raft.BatchingFSM: the batch is applied under one
// lock acquisition, so readers see whole batches.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	failpoint.Inject(failpoint.FSMBeforeApply)
	defer failpoint.Inject(failpoint.FSMAfterApply)
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]any, len(logs))
	for i, l := range logs {
		out[i] = f.applyLocked(l)
		f.watch.seal(l.Index) // Ownership change stream: one batch per entry that changed ownership.
	}
	if len(logs) > 0 {
		f.commitDurable(logs[len(logs)-1].Term)
	}
	f.published.Store(f.applied)
	return out
}

// applyLocked applies one entry. Callers hold mu.
func (f *FSM) applyLocked(l *raft.Log) any {
	if p := f.halted.Load(); p != nil {
		return *p
	}
	if f.replayed(l) {
		return &kvrpb.RaftResult{Code: uint32(CodeIgnored), Index: l.Index}
	}
	f.applied, f.term = l.Index, l.Term
	if l.Type != raft.LogCommand {
		return nil
	}
	if r, ok := f.applyFast(l.Index, l.Data); ok {
		r.Index = l.Index
		return r
	}
	d, err := decode(l.Data)
	if err != nil {
		herr := fmt.Errorf("%w: index %d: %w", ErrHalted, l.Index, err)
		f.halted.Store(&herr)
		f.log.Error("FSM halted on an undecodable entry", "index", l.Index, "term", l.Term, "err", err)
		return herr
	}
	if d.skip {
		return &kvrpb.RaftResult{Code: uint32(CodeIgnored), Index: l.Index}
	}
	r := commands[d.t].apply(f, l.Index, d.m)
	r.Index = l.Index
	return r
}

// Halted returns the halt error, or nil while the FSM applies entries.
func (f *FSM) Halted() error {
	if p := f.halted.Load(); p != nil {
		return *p
	}
	return nil
}

// AppliedIndex returns the index of the last entry applied: the last
// command or configuration entry, since raft hands no other entry to an
// FSM, or a restored snapshot's.
func (f *FSM) AppliedIndex() uint64 { return f.published.Load() }

// Index returns the exact prefix index the FSM feeds. Routing reads it
// directly; it lags the log by the apply lag only. During a Restore it is
// rebuilt in place, so a reader may briefly see a partial state.
func (f *FSM) Index() *index.Exact { return f.idx }

// remember records a result under its request id, when it has one.
func (f *FSM) remember(id string, r *kvrpb.RaftResult, idx uint64) *kvrpb.RaftResult {
	if id != "" {
		r.Index = idx
		f.st.RememberRequest(id, r, RememberedRequests)
	}
	return r
}

// recall returns a request id's first result, if remembered.
func (f *FSM) recall(id string) (*kvrpb.RaftResult, bool) {
	if id == "" {
		return nil, false
	}
	r, ok := f.st.Request(id)
	if !ok {
		return nil, false
	}
	return proto.CloneOf(r), true
}
