package consensus

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/store"
)

// MaxKeyBytes bounds a session key, as the node's frontend does.
const MaxKeyBytes = 256

// MaxRefsPerEntry bounds the sessions one keep-alive, release or expiry
// entry names, so that one entry stays far below MaxCommandBytes.
const MaxRefsPerEntry = 4096

var (
	errKey       = errors.New("key must be 1..256 bytes of UTF-8")
	errTTL       = errors.New("idle_ttl_nanos must be > 0")
	errRefs      = fmt.Errorf("at most %d sessions per entry", MaxRefsPerEntry)
	errDC        = fmt.Errorf("dc must be at most %d bytes of UTF-8", store.MaxDCBytes)
	errRequestID = fmt.Errorf("request_id must be at most %d bytes", store.MaxRequestIDBytes)
)

// checkKey validates a session key.
func checkKey(k string) error {
	if k == "" || len(k) > MaxKeyBytes || !utf8.ValidString(k) {
		return errKey
	}
	return nil
}

// checkRequestID validates an optional request id against the store's
// bound: an id the store refuses would stop a durable node's mirroring.
func checkRequestID(id string) error {
	if len(id) > store.MaxRequestIDBytes {
		return errRequestID
	}
	return nil
}

// checkRefs validates a list of session references.
func checkRefs(refs []*kvrpb.RaftSessionRef) error {
	if len(refs) > MaxRefsPerEntry {
		return errRefs
	}
	for _, r := range refs {
		if err := checkKey(r.GetKey()); err != nil {
			return err
		}
	}
	return nil
}

// liveAt reports whether b has not expired at the stamped time: a binding
// lives until its idle deadline, which keep-alives push forward while
// requests hold it.
func liveAt(b *kvrpb.RaftBinding, stamped int64) bool {
	return stamped < b.IdleDeadlineUnixNanos
}

var bindSpec = typed[*kvrpb.RaftBindSession]{
	name: "bind_session", apply: (*FSM).bind, validate: validateBind, needsReady: true,
	stamp: func(c *kvrpb.RaftBindSession, t int64) { c.StampedUnixNanos = t },
}.row()

// validateBind checks a bind's payload.
func validateBind(c *kvrpb.RaftBindSession) error {
	if err := checkKey(c.Key); err != nil {
		return err
	}
	if len(c.ParentKey) > MaxKeyBytes || !utf8.ValidString(c.ParentKey) {
		return errKey
	}
	// The store bounds a binding's DC; checked here, a bad bind is
	// refused before it reaches the log instead of stopping the store.
	if len(c.Dc) > store.MaxDCBytes || !utf8.ValidString(c.Dc) {
		return errDC
	}
	if err := checkRequestID(c.RequestId); err != nil {
		return err
	}
	if c.IdleTtlNanos <= 0 {
		return errTTL
	}
	if c.MaxSessions == 0 {
		return errors.New("max_sessions must be > 0")
	}
	return nil
}

// bind is the compare-and-set: the key's live version must be
// expect_version (0: no live binding). The winner's version is the entry's
// index, unique and increasing, which makes it a fencing token.
func (f *FSM) bind(idx uint64, c *kvrpb.RaftBindSession) *kvrpb.RaftResult {
	if r, ok := f.recall(c.RequestId); ok {
		return r
	}
	if validateBind(c) != nil {
		return result(CodeInvalid)
	}
	cur, ok := f.st.Session(c.Key)
	live := ok && liveAt(cur, c.StampedUnixNanos)
	if live && cur.Version != c.ExpectVersion || !live && c.ExpectVersion != 0 {
		r := result(CodeConflict)
		if live {
			r.Binding = proto.CloneOf(cur)
		}
		return f.remember(c.RequestId, r, idx)
	}
	if !ok && uint64(f.st.NumSessions()) >= c.MaxSessions {
		return f.remember(c.RequestId, result(CodeSessionLimit), idx)
	}
	b := &kvrpb.RaftBinding{
		Key: c.Key, ParentKey: c.ParentKey, WorkerId: c.WorkerId, Rank: c.Rank, Dc: c.Dc,
		Version: idx, IdleDeadlineUnixNanos: c.StampedUnixNanos + c.IdleTtlNanos, Active: true,
	}
	f.st.PutSession(b)
	if !ok {
		f.watch.sessionBound(c.Key) // Ownership change stream: a new binding.
	}
	return f.remember(c.RequestId, &kvrpb.RaftResult{Won: true, Binding: proto.CloneOf(b)}, idx)
}

var touchSpec = typed[*kvrpb.RaftTouchSessions]{
	name: "touch_sessions",
	apply: func(f *FSM, _ uint64, c *kvrpb.RaftTouchSessions) *kvrpb.RaftResult {
		return f.keepAlive(c.Sessions, c.StampedUnixNanos, c.IdleTtlNanos, true)
	},
	stamp:    func(c *kvrpb.RaftTouchSessions, t int64) { c.StampedUnixNanos = t },
	validate: func(c *kvrpb.RaftTouchSessions) error { return validateKeepAlive(c.Sessions, c.IdleTtlNanos) },
}.row()

var releaseSpec = typed[*kvrpb.RaftReleaseSessions]{
	name: "release_sessions",
	apply: func(f *FSM, _ uint64, c *kvrpb.RaftReleaseSessions) *kvrpb.RaftResult {
		return f.keepAlive(c.Sessions, c.StampedUnixNanos, c.IdleTtlNanos, false)
	},
	stamp:    func(c *kvrpb.RaftReleaseSessions, t int64) { c.StampedUnixNanos = t },
	validate: func(c *kvrpb.RaftReleaseSessions) error { return validateKeepAlive(c.Sessions, c.IdleTtlNanos) },
}.row()

// validateKeepAlive checks a touch or release payload.
func validateKeepAlive(refs []*kvrpb.RaftSessionRef, ttl int64) error {
	if ttl <= 0 {
		return errTTL
	}
	return checkRefs(refs)
}

// keepAlive pushes the idle deadline of each named live binding to
// stamped+ttl (never backwards) and sets its active flag. A binding that
// moved to another version or already expired is left alone.
func (f *FSM) keepAlive(refs []*kvrpb.RaftSessionRef, stamped, ttl int64, active bool) *kvrpb.RaftResult {
	if validateKeepAlive(refs, ttl) != nil {
		return result(CodeInvalid)
	}
	n := 0
	for _, r := range refs {
		b, ok := f.st.Session(r.Key)
		if !ok || b.Version != r.Version || !liveAt(b, stamped) {
			continue
		}
		nb := proto.CloneOf(b)
		nb.IdleDeadlineUnixNanos = max(b.IdleDeadlineUnixNanos, stamped+ttl)
		nb.Active = active
		f.st.PutSession(nb)
		n++
	}
	return counted(n)
}

var unbindSpec = typed[*kvrpb.RaftUnbindSession]{name: "unbind_session", apply: (*FSM).unbind, validate: validateUnbind}.row()

// validateUnbind checks an unbind's payload.
func validateUnbind(c *kvrpb.RaftUnbindSession) error {
	if err := checkKey(c.Key); err != nil {
		return err
	}
	return checkRequestID(c.RequestId)
}

// unbind drops a binding at a version, or at any version when it is 0.
func (f *FSM) unbind(idx uint64, c *kvrpb.RaftUnbindSession) *kvrpb.RaftResult {
	if r, ok := f.recall(c.RequestId); ok {
		return r
	}
	if validateUnbind(c) != nil {
		return result(CodeInvalid)
	}
	b, ok := f.st.Session(c.Key)
	if !ok || c.Version != 0 && b.Version != c.Version {
		return f.remember(c.RequestId, counted(0), idx)
	}
	f.st.DeleteSession(c.Key)
	f.watch.sessionUnbound(c.Key) // Ownership change stream.
	return f.remember(c.RequestId, counted(1), idx)
}

var expireSpec = typed[*kvrpb.RaftExpireSessions]{
	name: "expire_sessions", apply: (*FSM).expire,
	stamp:    func(c *kvrpb.RaftExpireSessions, t int64) { c.StampedUnixNanos = t },
	validate: func(c *kvrpb.RaftExpireSessions) error { return checkRefs(c.Sessions) },
}.row()

// expire drops each named binding that is still at its version and whose
// deadline is not after the stamped time. Every node judges by the
// stamped time, so every node drops the same bindings.
func (f *FSM) expire(_ uint64, c *kvrpb.RaftExpireSessions) *kvrpb.RaftResult {
	if checkRefs(c.Sessions) != nil {
		return result(CodeInvalid)
	}
	n := 0
	for _, r := range c.Sessions {
		b, ok := f.st.Session(r.Key)
		if ok && b.Version == r.Version && !liveAt(b, c.StampedUnixNanos) {
			f.st.DeleteSession(r.Key)
			f.watch.sessionUnbound(r.Key) // Ownership change stream.
			n++
		}
	}
	return counted(n)
}

var invalidateEngineSpec = typed[*kvrpb.RaftInvalidateEngine]{
	name: "invalidate_engine", apply: (*FSM).invalidateEngine,
	validate: func(c *kvrpb.RaftInvalidateEngine) error { return checkRequestID(c.RequestId) },
}.row()

// invalidateEngine drops every binding to any rank of the engine.
func (f *FSM) invalidateEngine(idx uint64, c *kvrpb.RaftInvalidateEngine) *kvrpb.RaftResult {
	if r, ok := f.recall(c.RequestId); ok {
		return r
	}
	if checkRequestID(c.RequestId) != nil {
		return result(CodeInvalid)
	}
	var keys []string
	f.st.Sessions(func(b *kvrpb.RaftBinding) bool {
		if b.WorkerId == c.WorkerId {
			keys = append(keys, b.Key)
		}
		return true
	})
	slices.Sort(keys)
	for _, k := range keys {
		f.st.DeleteSession(k)
		f.watch.sessionUnbound(k) // Ownership change stream.
	}
	return f.remember(c.RequestId, counted(len(keys)), idx)
}
