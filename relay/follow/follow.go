package follow

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/producer"
)

// Source is a producer.Source over the Ownership.Watch streams of a DC's
// router nodes. See the package doc for its guarantees.
type Source struct {
	cfg Config
	rng *rand.Rand

	// The fields below are Next's, used by one goroutine at a time.
	addr    int
	backoff time.Duration
	stream  grpc.ServerStreamingClient[kvrpb.OwnershipWatchMessage]
	cancel  context.CancelFunc
	snap    *snapshotBuf

	// base is the parent of every stream's context; Close cancels it.
	base     context.Context
	stopBase context.CancelFunc

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	index  uint64
	stats  Stats
	closed bool
	done   chan struct{}
}

// Stats are a Source's counters.
type Stats struct {
	// Index is the raft index of the last batch delivered (gauge).
	Index uint64
	// Batches and Snapshots count deliveries; Connects counts streams
	// opened; Failures counts streams that failed or could not open;
	// Overruns counts OUT_OF_RANGE ends; Gaps counts ordering violations.
	Batches, Snapshots, Connects, Failures, Overruns, Gaps uint64
}

var _ producer.Source = (*Source)(nil)

// New returns a Source that has delivered nothing (its first stream asks
// for index 0). rng draws backoff jitter; it must not be shared.
func New(cfg Config, rng *rand.Rand) (*Source, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rng == nil {
		return nil, fmt.Errorf("%w: nil rand", ErrConfig)
	}
	base, stop := context.WithCancel(context.Background())
	return &Source{cfg: cfg, rng: rng, backoff: cfg.MinBackoff,
		base: base, stopBase: stop, conns: map[string]*grpc.ClientConn{}, done: make(chan struct{})}, nil
}

// Next implements producer.Source: it returns the next batch, reconnecting
// and resuming as needed, until ctx ends or the Source is closed.
func (s *Source) Next(ctx context.Context) (producer.Batch, error) {
	for {
		if err := s.alive(ctx); err != nil {
			s.drop()
			return producer.Batch{}, err
		}
		if s.stream == nil {
			if err := s.open(); err != nil {
				s.fail(ctx, err)
				continue
			}
		}
		msg, err := s.recv(ctx)
		if err != nil {
			s.ended(ctx, err)
			continue
		}
		s.backoff = s.cfg.MinBackoff
		b, ok, err := s.handle(msg)
		if err != nil {
			s.count(func(st *Stats) { st.Gaps++ })
			s.cfg.Logger.Warn("ownership stream out of order; resuming", "index", s.Index(), "err", err)
			s.drop()
			continue
		}
		if ok {
			s.delivered(b)
			return b, nil
		}
	}
}

// alive returns ctx's error or ErrClosed, if any.
func (s *Source) alive(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-s.done:
		return ErrClosed
	default:
		return nil
	}
}

// open starts a watch from the last delivered index on the current
// address. The stream lives until drop or Close, independent of Next's
// ctx.
func (s *Source) open() error {
	cc, err := s.conn(s.cfg.Addrs[s.addr])
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(s.base)
	stream, err := kvrpb.NewOwnershipClient(cc).Watch(ctx, &kvrpb.OwnershipWatchRequest{FromIndex: s.Index()},
		grpc.MaxCallRecvMsgSize(s.cfg.MaxMessageBytes))
	if err != nil {
		cancel()
		return err
	}
	s.stream, s.cancel, s.snap = stream, cancel, nil
	s.count(func(st *Stats) { st.Connects++ })
	return nil
}

// recv reads one message; ctx ending or Close cancels the stream.
func (s *Source) recv(ctx context.Context) (*kvrpb.OwnershipWatchMessage, error) {
	stop := context.AfterFunc(ctx, s.cancel)
	defer stop()
	return s.stream.Recv()
}

// ended handles a stream's end: an overrun resubscribes at once on the
// same node (a snapshot follows); anything else moves to the next node
// after a backoff.
func (s *Source) ended(ctx context.Context, err error) {
	s.drop()
	if status.Code(err) == codes.OutOfRange {
		s.count(func(st *Stats) { st.Overruns++ })
		s.cfg.Logger.Info("fell out of the node's change ring; resubscribing", "index", s.Index())
		return
	}
	s.fail(ctx, err)
}

// fail counts a failed attempt, moves to the next address and waits.
func (s *Source) fail(ctx context.Context, err error) {
	s.drop()
	if s.alive(ctx) != nil {
		return
	}
	s.count(func(st *Stats) { st.Failures++ })
	s.cfg.Logger.Info("ownership stream failed; reconnecting", "addr", s.cfg.Addrs[s.addr], "err", err)
	s.addr = (s.addr + 1) % len(s.cfg.Addrs)
	wait := s.backoff/2 + time.Duration(s.rng.Int64N(int64(s.backoff/2)+1))
	s.backoff = min(2*s.backoff, s.cfg.MaxBackoff)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.done:
	}
}

// drop cancels the current stream, if any, and forgets a partial snapshot.
func (s *Source) drop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.stream, s.cancel, s.snap = nil, nil, nil
}

// conn returns the client connection to addr, creating it.
func (s *Source) conn(addr string) (*grpc.ClientConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if cc, ok := s.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, s.cfg.DialOptions...)
	if err != nil {
		return nil, fmt.Errorf("follow: dialing %s: %w", addr, err)
	}
	s.conns[addr] = cc
	return cc, nil
}

// delivered records a batch handed to the producer.
func (s *Source) delivered(b producer.Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index = b.Index
	s.stats.Batches++
}

// count updates the counters under the lock.
func (s *Source) count(fn func(*Stats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.stats)
}

// Index returns the raft index of the last batch delivered.
func (s *Source) Index() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.index
}

// Stats returns the counters.
func (s *Source) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Index = s.index
	return st
}

// Close ends a blocked Next with ErrClosed and closes every connection.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.done)
	s.stopBase()
	var err error
	for addr, cc := range s.conns {
		err = errors.Join(err, cc.Close())
		delete(s.conns, addr)
	}
	return err
}
