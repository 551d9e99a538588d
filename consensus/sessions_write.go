package consensus

import (
	"context"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// Acquire counts one more local request holding key's binding, if its live
// version is version. No entry is written; the next keep-alive touches it.
func (s *Sessions) Acquire(ctx context.Context, key string, version uint64, now time.Time) (bool, error) {
	b, ok, err := s.Lookup(ctx, key, now)
	if err != nil || !ok || b.Version != version {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.holds[key]
	if h.version != version {
		h = hold{version: version}
	}
	h.count++
	s.holds[key] = h
	delete(s.released, key)
	return true, nil
}

// Release ends one local hold; when the last holder leaves, the binding is
// reported in the next ReleaseSessions entry, which restarts its idle
// deadline on the leader's clock.
func (s *Sessions) Release(_ context.Context, key string, version uint64, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.holds[key]
	if !ok || h.version != version {
		return nil
	}
	if h.count--; h.count > 0 {
		s.holds[key] = h
		return nil
	}
	delete(s.holds, key)
	s.released[key] = version
	return nil
}

// Bind is compare-and-set through raft: it binds key to w if the key's
// live version (on the leader's clock) is expect (0: no live binding) and
// returns the new binding, held once by the caller, and true; otherwise
// the live winner and false. Indeterminate attempts are retried with the
// same request id until ctx ends.
func (s *Sessions) Bind(ctx context.Context, key string, w routing.Worker, expect uint64, _ time.Time) (Binding, bool, error) {
	cmd := &kvrpb.RaftBindSession{
		Key: key, WorkerId: uint64(w.ID), Rank: w.Rank, Dc: s.n.cfg.DC, ExpectVersion: expect,
		RequestId: s.requestID(), IdleTtlNanos: int64(s.cfg.TTL), MaxSessions: uint64(s.cfg.MaxSessions),
	}
	res, err := s.n.ApplyRetry(ctx, cmd)
	if err != nil {
		return Binding{}, false, err
	}
	switch Code(res.GetCode()) {
	case CodeSessionLimit:
		return Binding{}, false, fmt.Errorf("%w: %d sessions", ErrSessionLimit, s.cfg.MaxSessions)
	case CodeConflict:
		if res.GetBinding() == nil {
			return Binding{}, false, nil
		}
		return s.view(res.GetBinding()), false, nil
	case CodeOK:
	default:
		return Binding{}, false, fmt.Errorf("%w: bind answered %v", ErrBadCommand, Code(res.GetCode()))
	}
	s.mu.Lock()
	s.holds[key] = hold{version: res.GetBinding().GetVersion(), count: 1}
	delete(s.released, key)
	s.mu.Unlock()
	return s.view(res.GetBinding()), true, nil
}

// Invalidate drops key's binding if its version is version.
func (s *Sessions) Invalidate(ctx context.Context, key string, version uint64) (bool, error) {
	if version == 0 {
		return false, nil
	}
	res, err := s.n.ApplyRetry(ctx, &kvrpb.RaftUnbindSession{Key: key, Version: version, RequestId: s.requestID()})
	return res.GetCount() > 0, err
}

// Unbind drops key's binding whatever its version.
func (s *Sessions) Unbind(ctx context.Context, key string) error {
	_, err := s.n.ApplyRetry(ctx, &kvrpb.RaftUnbindSession{Key: key, RequestId: s.requestID()})
	return err
}

// InvalidateEngine drops every binding to any rank of engine id.
func (s *Sessions) InvalidateEngine(ctx context.Context, id routing.WorkerID) (int, error) {
	res, err := s.n.ApplyRetry(ctx, &kvrpb.RaftInvalidateEngine{WorkerId: uint64(id), RequestId: s.requestID()})
	return int(res.GetCount()), err
}
