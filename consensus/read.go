package consensus

import (
	"cmp"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// Session returns a copy of key's binding as applied locally, expired or
// not; callers judge liveness against their clock.
func (f *FSM) Session(key string) (*kvrpb.RaftBinding, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, ok := f.st.Session(key)
	if !ok {
		return nil, false
	}
	return proto.CloneOf(b), true
}

// NumSessions returns the number of bindings, live or not yet expired by
// the leader.
func (f *FSM) NumSessions() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.NumSessions()
}

// Expired returns up to limit bindings whose deadline is not after
// nowNanos, in key order.
func (f *FSM) Expired(nowNanos int64, limit int) []*kvrpb.RaftSessionRef {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*kvrpb.RaftSessionRef
	f.st.Sessions(func(b *kvrpb.RaftBinding) bool {
		if !liveAt(b, nowNanos) {
			out = append(out, &kvrpb.RaftSessionRef{Key: b.Key, Version: b.Version})
		}
		return true
	})
	slices.SortFunc(out, func(a, b *kvrpb.RaftSessionRef) int { return cmp.Compare(a.Key, b.Key) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// Worker returns a copy of an engine's registration.
func (f *FSM) Worker(id routing.WorkerID) (*kvrpb.RaftWorkerRecord, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, ok := f.st.Worker(id)
	if !ok {
		return nil, false
	}
	return proto.CloneOf(r), true
}

// Cursor returns the id of the last KV event applied for a rank; the
// leader compares it with an engine's reported last id to detect gaps
// after a failover.
func (f *FSM) Cursor(w routing.Worker) (uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.Cursor(w)
}
