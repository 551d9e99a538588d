package consensus

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/store"
)

// Worker-set reservations: the leader decides each worker set's incumbent
// model card checksum and writes it with one TypeSetIncumbent entry, so
// every node of the DC routes a set's traffic to the same cohort even when
// the nodes learnt the cards in different orders. The incumbents table (in
// memory, in Pebble and in snapshots) keeps the decision across restarts.
// The type byte carries IgnoreIfUnknown: a node of an older build skips
// the entry and keeps deciding locally, instead of halting.

// incumbentTable is the State's incumbents table, keyed by IncumbentKey.
type incumbentTable interface {
	// PutIncumbent stores r under its set's key.
	PutIncumbent(r *kvrpb.RaftIncumbent)
	// DeleteIncumbent drops a set's record.
	DeleteIncumbent(key string)
	// Incumbents calls fn for every set's record until it returns false.
	Incumbents(fn func(r *kvrpb.RaftIncumbent) bool)
}

// Incumbents is the incumbents table as of one applied entry; Generation
// changes with every change of the table.
type Incumbents struct {
	Generation uint64
	// BySet maps IncumbentKey to the set's incumbent checksum.
	BySet map[string]string
}

var errIncumbent = errors.New("incumbent: a set key of 1..2048 bytes with a model, and a checksum, are required")

// IncumbentKey encodes a worker set's key (namespace, component, endpoint,
// model, worker type) as one string; NUL cannot occur in the names.
func IncumbentKey(namespace, component, endpoint, model, workerType string) string {
	return strings.Join([]string{namespace, component, endpoint, model, workerType}, "\x00")
}

func incumbentKeyOf(r *kvrpb.RaftIncumbent) string {
	return IncumbentKey(r.GetNamespace(), r.GetComponent(), r.GetEndpoint(), r.GetModel(), r.GetWorkerType())
}

// setIncumbentSpec is the TypeSetIncumbent row of the command table.
var setIncumbentSpec = typed[*kvrpb.RaftSetIncumbent]{
	name: "set_incumbent", apply: (*FSM).setIncumbent, validate: validIncumbent, ignorable: true,
}.row()

// validIncumbent checks a command before it is proposed.
func validIncumbent(m *kvrpb.RaftSetIncumbent) error {
	if err := checkRequestID(m.RequestId); err != nil {
		return err
	}
	r := m.GetIncumbent()
	k := incumbentKeyOf(r)
	if r == nil || r.Model == "" || len(k) > store.MaxSetKeyBytes || strings.Count(k, "\x00") != 4 {
		return errIncumbent
	}
	if !m.Unset && (r.Checksum == "" || len(r.Checksum) > store.MaxSetKeyBytes) {
		return errIncumbent
	}
	return nil
}

// setIncumbent applies a TypeSetIncumbent entry. Callers hold mu.
func (f *FSM) setIncumbent(i uint64, m *kvrpb.RaftSetIncumbent) *kvrpb.RaftResult {
	if r, ok := f.recall(m.RequestId); ok {
		return r
	}
	if m.Unset {
		f.st.DeleteIncumbent(incumbentKeyOf(m.GetIncumbent()))
	} else {
		f.st.PutIncumbent(proto.CloneOf(m.GetIncumbent()))
	}
	f.refreshIncumbents()
	return f.remember(m.RequestId, result(CodeOK), i)
}

// refreshIncumbents publishes the table as an immutable value for
// lock-free reads. Callers hold mu (or own the FSM, in NewFSM).
func (f *FSM) refreshIncumbents() {
	var gen uint64
	if p := f.incumbents.Load(); p != nil {
		gen = p.Generation
	}
	m := map[string]string{}
	f.st.Incumbents(func(r *kvrpb.RaftIncumbent) bool { m[incumbentKeyOf(r)] = r.Checksum; return true })
	f.incumbents.Store(&Incumbents{Generation: gen + 1, BySet: m})
}

// WorkerSetIncumbents returns the incumbents table as of the last applied
// entry, without locking; the result must not be modified.
func (f *FSM) WorkerSetIncumbents() *Incumbents {
	if p := f.incumbents.Load(); p != nil {
		return p
	}
	return &Incumbents{}
}

// SetIncumbent records a worker set's incumbent checksum in the DC (with
// unset, drops the set's record) through the raft log, retrying an
// indeterminate attempt under the same request id, and returns the
// entry's index.
func (n *Node) SetIncumbent(ctx context.Context, requestID string, r *kvrpb.RaftIncumbent, unset bool) (uint64, error) {
	return n.applyIndex(ctx, "set_incumbent", &kvrpb.RaftSetIncumbent{RequestId: requestID, Incumbent: r, Unset: unset})
}

// PutIncumbent implements State.
func (s *MemState) PutIncumbent(r *kvrpb.RaftIncumbent) { s.incumbents[incumbentKeyOf(r)] = r }

// DeleteIncumbent implements State.
func (s *MemState) DeleteIncumbent(key string) { delete(s.incumbents, key) }

// Incumbents implements State.
func (s *MemState) Incumbents(fn func(r *kvrpb.RaftIncumbent) bool) { each(s.incumbents, fn) }

// PutIncumbent implements State.
func (s *StoreState) PutIncumbent(r *kvrpb.RaftIncumbent) {
	s.MemState.PutIncumbent(r)
	s.mirrorProto(r, func(bt *store.Batch, v []byte) { bt.PutIncumbent(incumbentKeyOf(r), v) })
}

// DeleteIncumbent implements State.
func (s *StoreState) DeleteIncumbent(key string) {
	s.MemState.DeleteIncumbent(key)
	s.mirror(func(bt *store.Batch) { bt.DeleteIncumbent(key) })
}

// loadIncumbents copies the incumbents table into memory.
func (s *StoreState) loadIncumbents() error {
	return s.s.ScanIncumbents(func(row store.Incumbent) error { return unmarshalTo(row.Value, s.MemState.PutIncumbent) })
}

// resetIncumbents deletes the table's rows from the store. Callers hold
// the open batch.
func (s *StoreState) resetIncumbents(bt *store.Batch) {
	s.MemState.Incumbents(func(r *kvrpb.RaftIncumbent) bool { bt.DeleteIncumbent(incumbentKeyOf(r)); return true })
}
