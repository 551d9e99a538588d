package consensus

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// keepAlive flushes every KeepAliveInterval until Close.
func (s *Sessions) keepAlive() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.KeepAliveInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.KeepAliveInterval)
			if err := s.Flush(ctx); err != nil {
				s.n.log.Warn("session keep-alive", "err", err)
			}
			cancel()
		}
	}
}

// Flush writes one TouchSessions entry for the held bindings and one
// ReleaseSessions entry for the released ones (more when over
// MaxRefsPerEntry). Releases that fail to commit are reported again at
// the next flush; keep-alives are idempotent.
func (s *Sessions) Flush(ctx context.Context) error {
	held, released := s.pending()
	ttl := int64(s.cfg.TTL)
	for c := range slices.Chunk(held, MaxRefsPerEntry) {
		if _, err := s.n.Apply(ctx, &kvrpb.RaftTouchSessions{Sessions: c, IdleTtlNanos: ttl}); err != nil {
			s.requeue(released)
			return err
		}
	}
	for i, c := range slices.Collect(slices.Chunk(released, MaxRefsPerEntry)) {
		if _, err := s.n.Apply(ctx, &kvrpb.RaftReleaseSessions{Sessions: c, IdleTtlNanos: ttl}); err != nil {
			s.requeue(released[i*MaxRefsPerEntry:])
			return err
		}
	}
	return nil
}

// pending returns the held bindings and takes the released ones, each in
// key order.
func (s *Sessions) pending() (held, released []*kvrpb.RaftSessionRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(s.holds)) {
		held = append(held, &kvrpb.RaftSessionRef{Key: k, Version: s.holds[k].version})
	}
	for _, k := range slices.Sorted(maps.Keys(s.released)) {
		released = append(released, &kvrpb.RaftSessionRef{Key: k, Version: s.released[k]})
	}
	clear(s.released)
	return held, released
}

// requeue puts releases back unless the key is held again.
func (s *Sessions) requeue(refs []*kvrpb.RaftSessionRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range refs {
		if _, held := s.holds[r.Key]; !held {
			if _, newer := s.released[r.Key]; !newer {
				s.released[r.Key] = r.Version
			}
		}
	}
}
