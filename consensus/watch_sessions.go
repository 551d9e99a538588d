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
	h := kvrpb.SessionKeyHash(key)
	if i := slices.Index(l.pendUnbound, h); i >= 0 {
		// Unbound and bound again within one entry: no net change.
		l.pendUnbound = slices.Delete(l.pendUnbound, i, i+1)
		return
	}
	l.pendBound = append(l.pendBound, h)
}

// sessionUnbound records that the entry dropped key's binding.
func (l *OwnershipLog) sessionUnbound(key string) {
	h := kvrpb.SessionKeyHash(key)
	if i := slices.Index(l.pendBound, h); i >= 0 {
		// Bound and dropped within one entry: no net change.
		l.pendBound = slices.Delete(l.pendBound, i, i+1)
		return
	}
	l.pendUnbound = append(l.pendUnbound, h)
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

// appendSessionChunks adds sessions to the chunk list of a snapshot, in
// chunks of at most maxHashes hashes counting the ranks' hashes already
// in the last chunk (room).
func appendSessionChunks(out []*kvrpb.OwnershipSnapshotChunk, index uint64, sessions []uint64, room, maxHashes int) []*kvrpb.OwnershipSnapshotChunk {
	cur := out[len(out)-1]
	for hs := sessions; len(hs) > 0; {
		if room == 0 {
			cur = &kvrpb.OwnershipSnapshotChunk{Index: index, Seq: uint32(len(out))}
			out, room = append(out, cur), maxHashes
		}
		n := min(room, len(hs))
		cur.Sessions = append(cur.Sessions, hs[:n]...)
		hs, room = hs[n:], room-n
	}
	return out
}
