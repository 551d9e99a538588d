package consumer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/relay/filter"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/relay/publish"
	"github.com/kvrouter/kvrouter/routing"
)

// Lane mirrors one remote pool's summary (a cuckoo or Bloom filter). Its goroutine subscribes, applies
// events in order and resubscribes with backoff after any error; queries
// read it under a read lock. Until its first snapshot a lane is not ready;
// after an error it keeps serving its last consistent image, and its
// staleness grows until a new snapshot arrives.
type Lane struct {
	pool   producer.PoolID
	client kvrpb.RelayClient
	cfg    *Config
	rng    *rand.Rand

	// mu is shared by every lane of the pool's cache domain (laneSet.with
	// sets it), so that a query takes one read lock for all of them.
	mu      *sync.RWMutex
	f       filter.Summary
	epoch   uint64
	seq     uint64
	heard   time.Time
	load    producer.Load
	entries uint64
	stats   LaneStatus
}

// LaneStatus describes a lane for diagnostics and metrics.
type LaneStatus struct {
	Pool  producer.PoolID
	Ready bool
	// Epoch and Seq are the applied publication position.
	Epoch, Seq uint64
	// Heard is when the last snapshot, delta or heartbeat was applied;
	// Staleness is now minus Heard (0 when never heard).
	Heard     time.Time
	Staleness time.Duration
	Load      producer.Load
	Entries   uint64
	// Snapshots, Deltas and Heartbeats count applied events; Bytes their
	// payload sizes.
	Snapshots, Deltas, Heartbeats, Bytes uint64
	// Subscribes counts stream openings; LastErr is the error that ended
	// the last stream.
	Subscribes uint64
	LastErr    error
}

// Pool returns the lane's remote pool.
func (l *Lane) Pool() producer.PoolID { return l.pool }

// run is the lane's goroutine: sessions separated by backoff until ctx ends.
func (l *Lane) run(ctx context.Context) {
	attempt := 0
	for ctx.Err() == nil {
		synced, err := l.session(ctx)
		if ctx.Err() != nil {
			return
		}
		l.noteErr(err)
		if synced {
			attempt = 0
		}
		d := l.backoff(publish.ActionFor(err), attempt)
		attempt++
		if !sleep(ctx, d) {
			return
		}
	}
}

// session runs one subscription until it fails; synced reports whether it
// delivered a snapshot, which resets the backoff.
func (l *Lane) session(ctx context.Context) (synced bool, err error) {
	l.mu.Lock()
	l.stats.Subscribes++
	req := publish.Request{Pool: l.pool, SubscriberID: l.cfg.SubscriberID, LastEpoch: l.epoch, LastSeq: l.seq,
		MaxSnapshotBytes: l.cfg.MaxSnapshotBytes}
	l.mu.Unlock()
	s, err := publish.Subscribe(ctx, l.client, req)
	if err != nil {
		return false, err
	}
	defer s.Close()
	for {
		ev, err := s.Recv()
		if err != nil {
			return synced, err
		}
		if err := l.apply(ev); err != nil {
			return synced, err
		}
		synced = true
	}
}

// apply installs one validated event under the write lock.
func (l *Lane) apply(ev publish.Event) error {
	now := l.cfg.Now()
	l.mu.Lock()
	switch ev.Kind {
	case publish.EventSnapshot:
		l.f, l.epoch, l.seq = ev.Filter, ev.Epoch, ev.Seq
		l.stats.Snapshots++
	case publish.EventDelta:
		if err := l.f.Apply(ev.Delta); err != nil {
			l.mu.Unlock()
			return fmt.Errorf("%w: seq %d: %w", ErrApply, ev.Seq, err)
		}
		l.seq = ev.Seq
		l.stats.Deltas++
	case publish.EventHeartbeat:
		l.load, l.entries = ev.Load, ev.Entries
		l.stats.Heartbeats++
	}
	l.stats.Bytes += uint64(ev.Bytes)
	l.heard = now
	l.mu.Unlock()
	if l.cfg.Observe != nil {
		l.cfg.Observe(l.pool, ev, now)
	}
	return nil
}

// noteErr records the error that ended a stream.
func (l *Lane) noteErr(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats.LastErr = err
}

// backoff returns the delay before the next subscription.
func (l *Lane) backoff(a publish.Action, attempt int) time.Duration {
	switch {
	case a == publish.ResubscribeNow && attempt == 0:
		return 0
	case a == publish.ResubscribeSlow:
		return l.jitter(l.cfg.BackoffMax)
	}
	d := l.cfg.BackoffBase << min(attempt, 30)
	if d <= 0 || d > l.cfg.BackoffMax {
		d = l.cfg.BackoffMax
	}
	return l.jitter(d)
}

// jitter draws uniformly from [d/2, d).
func (l *Lane) jitter(d time.Duration) time.Duration {
	half := d / 2
	return half + time.Duration(l.rng.Int64N(int64(max(half, 1))))
}

// sleep waits d or until ctx ends; it reports whether to continue.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// query answers one lane's part of a query; the caller holds l.mu for
// reading.
func (l *Lane) query(hs []routing.SeqHash, window int, now time.Time) Result {
	r := l.result(now)
	if r.Ready {
		r.Depth = prefixDepth(l.f, hs, window)
	}
	return r
}

// result is the lane's Result at now without a depth; the caller holds
// l.mu for reading.
func (l *Lane) result(now time.Time) Result {
	r := Result{Pool: l.pool, Ready: l.f != nil, Load: l.load}
	if r.Ready {
		r.Staleness = now.Sub(l.heard)
	}
	return r
}

// view is the lane's LaneView at now, as result(now).View() but without
// building the Result; the caller holds l.mu for reading.
func (l *Lane) view(now time.Time) LaneView {
	v := LaneView{Pool: &l.pool, Ready: l.f != nil, Load: &l.load}
	if v.Ready {
		v.Staleness = now.Sub(l.heard)
	}
	return v
}

// Status returns the lane's state with staleness measured at now.
func (l *Lane) Status(now time.Time) LaneStatus {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := l.stats
	s.Pool, s.Ready = l.pool, l.f != nil
	s.Epoch, s.Seq, s.Heard, s.Load, s.Entries = l.epoch, l.seq, l.heard, l.load, l.entries
	if !l.heard.IsZero() {
		s.Staleness = now.Sub(l.heard)
	}
	return s
}

// MarshalBinary encodes the lane's filter (nil before the first snapshot),
// for convergence checks and diagnostics.
func (l *Lane) MarshalBinary() ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.f == nil {
		return nil, nil
	}
	return l.f.MarshalBinary()
}
