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

var bindSpec = spec{
	name: "bind_session",
	new:  func() proto.Message { return &kvrpb.RaftBindSession{} },
	apply: func(f *FSM, i uint64, m proto.Message) *kvrpb.RaftResult {
		return f.bind(i, m.(*kvrpb.RaftBindSession))
	},
	stamp:      func(m proto.Message, t int64) { m.(*kvrpb.RaftBindSession).StampedUnixNanos = t },
	validate:   func(m proto.Message) error { return validateBind(m.(*kvrpb.RaftBindSession)) },
	needsReady: true,
}

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

var touchSpec = spec{
	name: "touch_sessions",
	new:  func() proto.Message { return &kvrpb.RaftTouchSessions{} },
	apply: func(f *FSM, _ uint64, m proto.Message) *kvrpb.RaftResult {
		c := m.(*kvrpb.RaftTouchSessions)
		return f.keepAlive(c.Sessions, c.StampedUnixNanos, c.IdleTtlNanos, true)
	},
	stamp: func(m proto.Message, t int64) { m.(*kvrpb.RaftTouchSessions).StampedUnixNanos = t },
	validate: func(m proto.Message) error {
		c := m.(*kvrpb.RaftTouchSessions)
		return validateKeepAlive(c.Sessions, c.IdleTtlNanos)
	},
}

var releaseSpec = spec{
	name: "release_sessions",
	new:  func() proto.Message { return &kvrpb.RaftReleaseSessions{} },
	apply: func(f *FSM, _ uint64, m proto.Message) *kvrpb.RaftResult {
		c := m.(*kvrpb.RaftReleaseSessions)
		return f.keepAlive(c.Sessions, c.StampedUnixNanos, c.IdleTtlNanos, false)
	},
	stamp: func(m proto.Message, t int64) { m.(*kvrpb.RaftReleaseSessions).StampedUnixNanos = t },
	validate: func(m proto.Message) error {
		c := m.(*kvrpb.RaftReleaseSessions)
		return validateKeepAlive(c.Sessions, c.IdleTtlNanos)
	},
}

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

var unbindSpec = spec{
	name: "unbind_session",
	new:  func() proto.Message { return &kvrpb.RaftUnbindSession{} },
	apply: func(f *FSM, i uint64, m proto.Message) *kvrpb.RaftResult {
		return f.unbind(i, m.(*kvrpb.RaftUnbindSession))
	},
	stamp:    func(proto.Message, int64) {},
	validate: func(m proto.Message) error { return validateUnbind(m.(*kvrpb.RaftUnbindSession)) },
}

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

var expireSpec = spec{
	name: "expire_sessions",
	new:  func() proto.Message { return &kvrpb.RaftExpireSessions{} },
	apply: func(f *FSM, _ uint64, m proto.Message) *kvrpb.RaftResult {
		return f.expire(m.(*kvrpb.RaftExpireSessions))
	},
	stamp:    func(m proto.Message, t int64) { m.(*kvrpb.RaftExpireSessions).StampedUnixNanos = t },
	validate: func(m proto.Message) error { return checkRefs(m.(*kvrpb.RaftExpireSessions).Sessions) },
}

// expire drops each named binding that is still at its version and whose
// deadline is not after the stamped time. Every node judges by the
// stamped time, so every node drops the same bindings.
func (f *FSM) expire(c *kvrpb.RaftExpireSessions) *kvrpb.RaftResult {
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

var invalidateEngineSpec = spec{
	name: "invalidate_engine",
	new:  func() proto.Message { return &kvrpb.RaftInvalidateEngine{} },
	apply: func(f *FSM, i uint64, m proto.Message) *kvrpb.RaftResult {
		return f.invalidateEngine(i, m.(*kvrpb.RaftInvalidateEngine))
	},
	stamp: func(proto.Message, int64) {},
	validate: func(m proto.Message) error {
		return checkRequestID(m.(*kvrpb.RaftInvalidateEngine).RequestId)
	},
}

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
