package consensus

import (
	"slices"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// Session changes in the ownership change stream
//
// The session hooks of the apply path (fsm_sessions.go) report every
// binding that starts (a bind of a key with no binding in the table) and
// every one that ends (unbind, expiry, engine invalidation) as the key's
// kvrpb.SessionKeyHash. A bind that replaces a binding, live or expired
// but not yet dropped, keeps the key bound and reports nothing; so does a
// keep-alive. Restoring a raft snapshot resets the log (restore.go), so
// every watcher starts again from a snapshot, which lists the bound
// sessions (FSM.OwnershipSnapshot). Bound here means "present in the
// sessions table": a binding past its idle deadline stays bound until an
// expiry entry drops it, and a watcher that asks the node for it is told
// it is not live. The summary therefore errs only towards "present", which
// costs its readers a lookup, never a missed binding.

// sessionBound records that the entry bound key, absent before.
func (l *OwnershipLog) sessionBound(key string) {
	l.pendBound, l.pendUnbound = noteSession(l.pendBound, l.pendUnbound, key)
}

// sessionUnbound records that the entry dropped key's binding.
func (l *OwnershipLog) sessionUnbound(key string) {
	l.pendUnbound, l.pendBound = noteSession(l.pendUnbound, l.pendBound, key)
}

// noteSession adds key's hash to the entry's changes of one kind (to),
// unless it undoes a change of the opposite kind (from) within the entry,
// which is then dropped: bound and unbound within one entry (or the
// reverse) is no net change.
func noteSession(to, from []uint64, key string) ([]uint64, []uint64) {
	h := kvrpb.SessionKeyHash(key)
	if i := slices.Index(from, h); i >= 0 {
		return to, slices.Delete(from, i, i+1)
	}
	return append(to, h), from
}

// sealSessions moves the entry's session changes into b, as exact-size
// copies, and empties the pending lists.
func (l *OwnershipLog) sealSessions(b *OwnershipBatch) {
	if len(l.pendBound) > 0 {
		b.SessionsBound = slices.Clone(l.pendBound)
	}
	if len(l.pendUnbound) > 0 {
		b.SessionsUnbound = slices.Clone(l.pendUnbound)
	}
	l.pendBound, l.pendUnbound = l.pendBound[:0], l.pendUnbound[:0]
}

// sessionHashes lists the hash of every bound session key. Callers hold
// the FSM's lock.
func (f *FSM) sessionHashes() []uint64 {
	if f.st.NumSessions() == 0 {
		return nil
	}
	out := make([]uint64, 0, f.st.NumSessions())
	f.st.Sessions(func(b *kvrpb.RaftBinding) bool {
		out = append(out, kvrpb.SessionKeyHash(b.Key))
		return true
	})
	return out
}
