package consensus

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// Binding is a session's engine; see routing.Binding.
type Binding = routing.Binding

// SessionsConfig configures Sessions.
type SessionsConfig struct {
	// TTL is the idle time after which an unheld binding expires.
	TTL time.Duration
	// MaxSessions bounds the bindings of the DC; it travels in every bind
	// entry, so nodes with different settings still agree.
	MaxSessions int
	// KeepAliveInterval is how often held bindings are touched and
	// released ones reported, in one entry each (default TTL/4). It must
	// be below TTL/2, so a held binding never expires between two
	// keep-alives even when one is lost.
	KeepAliveInterval time.Duration
}

// Sessions is the replicated session store of one node: the method set of
// node/dispatch.Bindings over the DC's raft FSM. Lookups are local reads
// of the applied state; Bind, Invalidate, Unbind and InvalidateEngine go
// through raft (compare-and-set for Bind). Acquire and Release are not
// written per request: they count holders in memory, and a keep-alive
// loop writes one TouchSessions entry for the held bindings and one
// ReleaseSessions entry for those whose last holder left, every
// KeepAliveInterval. Liveness is the FSM's deadline, judged against the
// caller's clock, or a local hold.
//
// Concurrency: all methods are safe for concurrent use. Close stops the
// keep-alive loop.
type Sessions struct {
	n    *Node
	cfg  SessionsConfig
	reqs atomic.Uint64
	inc  int64

	mu       sync.Mutex
	holds    map[string]hold
	released map[string]uint64

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// hold is this node's requests holding one binding version.
type hold struct {
	version uint64
	count   int
}

// NewSessions validates cfg and starts the keep-alive loop.
func NewSessions(n *Node, cfg SessionsConfig) (*Sessions, error) {
	if cfg.KeepAliveInterval == 0 {
		cfg.KeepAliveInterval = cfg.TTL / 4
	}
	switch {
	case cfg.TTL <= 0:
		return nil, configError("affinity_ttl: must be > 0, got %v", cfg.TTL)
	case cfg.MaxSessions <= 0:
		return nil, configError("max_sessions: must be > 0, got %d", cfg.MaxSessions)
	case cfg.KeepAliveInterval <= 0 || cfg.KeepAliveInterval >= cfg.TTL/2:
		return nil, configError("keepalive_interval: %v must be in (0, affinity_ttl/2)", cfg.KeepAliveInterval)
	}
	s := &Sessions{n: n, cfg: cfg, inc: n.cfg.Now().UnixNano(), holds: map[string]hold{},
		released: map[string]uint64{}, stop: make(chan struct{})}
	s.wg.Add(1)
	go s.keepAlive()
	return s, nil
}

// Close stops the keep-alive loop; it does not flush.
func (s *Sessions) Close() error {
	s.once.Do(func() { close(s.stop) })
	s.wg.Wait()
	return nil
}

// requestID returns a request id unique to this store: node id, the
// store's start time, a sequence number.
func (s *Sessions) requestID() string {
	return fmt.Sprintf("%s/%x/%d", s.n.cfg.NodeID, s.inc, s.reqs.Add(1))
}

// view converts an FSM binding, adding this node's holders.
func (s *Sessions) view(b *kvrpb.RaftBinding) Binding {
	out := Binding{
		Worker:       routing.Worker{ID: routing.WorkerID(b.GetWorkerId()), Rank: b.GetRank()},
		Version:      b.GetVersion(),
		IdleDeadline: time.Unix(0, b.GetIdleDeadlineUnixNanos()),
	}
	s.mu.Lock()
	if h, ok := s.holds[b.GetKey()]; ok && h.version == out.Version {
		out.Active = h.count
	}
	s.mu.Unlock()
	return out
}

// Lookup returns key's live binding from the local FSM, without holding it.
func (s *Sessions) Lookup(_ context.Context, key string, now time.Time) (Binding, bool, error) {
	if err := checkKey(key); err != nil {
		return Binding{}, false, fmt.Errorf("%w: session key: %w", ErrBadCommand, err)
	}
	b, ok := s.n.fsm.Session(key)
	if !ok {
		return Binding{}, false, nil
	}
	v := s.view(b)
	if v.Active == 0 && !now.Before(v.IdleDeadline) {
		return Binding{}, false, nil
	}
	return v, true, nil
}

// Len returns the number of bindings in the local FSM.
func (s *Sessions) Len() int { return s.n.fsm.NumSessions() }
