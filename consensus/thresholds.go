package consensus

import (
	"context"
	"errors"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/store"
)

// Runtime busy thresholds: the operator API changes a model's thresholds
// with one TypeSetThresholds entry, so every node of the DC applies the
// same value at the same index, and the thresholds table (in memory, in
// Pebble and in snapshots) keeps it across restarts. The entry's type
// byte carries IgnoreIfUnknown: a node of an older build skips it and
// keeps its configured thresholds, instead of halting.

// thresholdTable is the State's thresholds table.
type thresholdTable interface {
	// PutThreshold stores t under t.Model.
	PutThreshold(t *kvrpb.RaftThresholds)
	// DeleteThreshold drops a model's runtime thresholds.
	DeleteThreshold(model string)
	// Thresholds calls fn for every model's thresholds until it returns
	// false.
	Thresholds(fn func(t *kvrpb.RaftThresholds) bool)
}

var errThresholds = errors.New("thresholds: a model of 1..512 bytes and values in range are required")

// setThresholdsSpec is the TypeSetThresholds row of the command table.
var setThresholdsSpec = typed[*kvrpb.RaftSetThresholds]{
	name: "set_thresholds", apply: (*FSM).setThresholds, validate: validThresholds, ignorable: true,
}.row()

// validThresholds checks a command before it is proposed.
func validThresholds(m *kvrpb.RaftSetThresholds) error {
	if err := checkRequestID(m.RequestId); err != nil {
		return err
	}
	t := m.GetThresholds()
	if t == nil || t.Model == "" || len(t.Model) > store.MaxModelBytes {
		return errThresholds
	}
	if m.Unset {
		return nil
	}
	switch {
	case t.ActiveDecodeBlocks != nil && !(*t.ActiveDecodeBlocks >= 0 && *t.ActiveDecodeBlocks <= 1):
	case t.ActivePrefillTokens != nil && *t.ActivePrefillTokens < 0:
	case t.ActivePrefillTokensFrac != nil && !(*t.ActivePrefillTokensFrac >= 0 && !math.IsInf(*t.ActivePrefillTokensFrac, 1)):
	default:
		return nil
	}
	return errThresholds
}

// setThresholds applies a TypeSetThresholds entry. Callers hold mu.
func (f *FSM) setThresholds(i uint64, m *kvrpb.RaftSetThresholds) *kvrpb.RaftResult {
	if r, ok := f.recall(m.RequestId); ok {
		return r
	}
	t := m.GetThresholds()
	if m.Unset {
		f.st.DeleteThreshold(t.GetModel())
	} else {
		f.st.PutThreshold(proto.CloneOf(t))
	}
	f.refreshThresholds()
	return f.remember(m.RequestId, result(CodeOK), i)
}

// refreshThresholds publishes the table as an immutable map for
// lock-free reads on the request path. Callers hold mu.
func (f *FSM) refreshThresholds() {
	m := map[string]*kvrpb.RaftThresholds{}
	f.st.Thresholds(func(t *kvrpb.RaftThresholds) bool { m[t.Model] = t; return true })
	f.thresholds.Store(&m)
}

// RuntimeThresholds returns a model's thresholds as of the last applied
// entry, without locking; the result must not be modified.
func (f *FSM) RuntimeThresholds(model string) (*kvrpb.RaftThresholds, bool) {
	p := f.thresholds.Load()
	if p == nil {
		return nil, false
	}
	t, ok := (*p)[model]
	return t, ok
}

// SetThresholds replaces a model's runtime thresholds in the DC (with
// unset, drops them) through the raft log, retrying an indeterminate
// attempt under the same request id, and returns the entry's index.
func (n *Node) SetThresholds(ctx context.Context, requestID string, t *kvrpb.RaftThresholds, unset bool) (uint64, error) {
	return n.applyIndex(ctx, "set_thresholds", &kvrpb.RaftSetThresholds{RequestId: requestID, Thresholds: t, Unset: unset})
}

// PutThreshold implements State.
func (s *MemState) PutThreshold(t *kvrpb.RaftThresholds) { s.thresholds[t.Model] = t }

// DeleteThreshold implements State.
func (s *MemState) DeleteThreshold(model string) { delete(s.thresholds, model) }

// Thresholds implements State.
func (s *MemState) Thresholds(fn func(t *kvrpb.RaftThresholds) bool) { each(s.thresholds, fn) }

// PutThreshold implements State.
func (s *StoreState) PutThreshold(t *kvrpb.RaftThresholds) {
	s.MemState.PutThreshold(t)
	s.mirrorProto(t, func(bt *store.Batch, v []byte) { bt.PutThreshold(t.Model, v) })
}

// DeleteThreshold implements State.
func (s *StoreState) DeleteThreshold(model string) {
	s.MemState.DeleteThreshold(model)
	s.mirror(func(bt *store.Batch) { bt.DeleteThreshold(model) })
}

// loadThresholds copies the thresholds table into memory.
func (s *StoreState) loadThresholds() error {
	return s.s.ScanThresholds(func(row store.Threshold) error { return unmarshalTo(row.Value, s.MemState.PutThreshold) })
}

// resetThresholds deletes the table's rows from the store. Callers hold
// the open batch.
func (s *StoreState) resetThresholds(bt *store.Batch) {
	s.MemState.Thresholds(func(t *kvrpb.RaftThresholds) bool { bt.DeleteThreshold(t.Model); return true })
}
