package consensus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/internal/failpoint"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// Apply is the one write path: propose, then wait. On the leader the
// command is validated, stamped with the time and encoded once, then
// raft.Apply'd with a timeout; a follower encodes it and forwards it to
// the leader. The FSM's result is unwrapped and returned. A business
// outcome (a lost bind) is in the result's code, not in the error. m is
// stamped in place.
//
// Errors: ErrBadCommand, ErrTooLarge, ErrNotReady, ErrNoLeader and
// ErrForwardLoop mean nothing was proposed; ErrIndeterminate means the
// command may have committed, so retry with the same request id;
// ErrHalted means this node's FSM stopped.
func (n *Node) Apply(ctx context.Context, m proto.Message) (*kvrpb.RaftResult, error) {
	wait, err := n.propose(ctx, m)
	if err != nil {
		return nil, err
	}
	return wait()
}

// applyBytes applies a follower's forwarded command, or forwards it when
// this node is not the leader either, unless it was forwarded already.
func (n *Node) applyBytes(ctx context.Context, data []byte, forwarded bool) (*kvrpb.RaftResult, error) {
	if len(data) > n.cfg.MaxCommandBytes {
		return nil, fmt.Errorf("%w: %d bytes over %d", ErrTooLarge, len(data), n.cfg.MaxCommandBytes)
	}
	if n.IsLeader() {
		// The leader re-validates forwarded bytes (and stamps its time):
		// an entry the FSM cannot decode would halt every node.
		d, err := decode(data)
		if err != nil || d.skip {
			return nil, fmt.Errorf("%w: not a known command", ErrBadCommand)
		}
		wait, err := n.proposeMessage(ctx, d.t, d.m)
		if err != nil {
			return nil, err
		}
		return wait()
	}
	if forwarded {
		return nil, ErrForwardLoop
	}
	return n.forward(ctx, data)
}

// proposeMessage validates, stamps (in place), encodes and enqueues a
// command of type t on the leader, and returns a function that waits for
// its result. raft.Apply hands the entry to raft's apply queue before it
// returns, so the entries one goroutine proposes are logged in call order
// even when nobody waits in between.
func (n *Node) proposeMessage(ctx context.Context, t Type, m proto.Message) (func() (*kvrpb.RaftResult, error), error) {
	s := commands[t]
	if err := s.validate(m); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadCommand, s.name, err)
	}
	if s.needsReady && !n.ready.Load() {
		if err := n.awaitReady(ctx); err != nil {
			return nil, err
		}
	}
	s.stamp(m, n.cfg.Now().UnixNano())
	data, err := encodeTyped(t, m)
	if err != nil {
		return nil, err
	}
	return n.proposeEncoded(ctx, s.name, data)
}

// awaitReady waits until the node, which leads, has passed its barrier,
// for at most HeartbeatTimeout; ErrNotReady when it does not, or stops
// leading. A follower learns of a new leader from its first append,
// before the barrier's entry committed, and forwards its pending writes
// at once (leaderchange.go); refusing them would send each back into its
// backoff for the few milliseconds the barrier takes.
func (n *Node) awaitReady(ctx context.Context) error {
	t := time.NewTimer(n.cfg.HeartbeatTimeout)
	defer t.Stop()
	for {
		changed := n.leaderChange.changed()
		if n.ready.Load() {
			return nil
		}
		if !n.IsLeader() {
			return ErrNotReady
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ErrNotReady
		case <-t.C:
			return ErrNotReady
		case <-n.stop:
			return ErrNotReady
		}
	}
}

// proposeEncoded enqueues an encoded, validated entry on the leader and
// returns a function that waits for its result.
func (n *Node) proposeEncoded(ctx context.Context, name string, data []byte) (func() (*kvrpb.RaftResult, error), error) {
	if len(data) > n.cfg.MaxCommandBytes {
		return nil, fmt.Errorf("%w: %d bytes over %d", ErrTooLarge, len(data), n.cfg.MaxCommandBytes)
	}
	if n.health.full() {
		return nil, ErrDiskFull
	}
	n.propMu.RLock()
	if n.closing {
		n.propMu.RUnlock()
		return nil, fmt.Errorf("%w: node shutting down", ErrNoLeader)
	}
	f := n.raft.Apply(data, n.timeout(ctx))
	n.propMu.RUnlock()
	return func() (*kvrpb.RaftResult, error) {
		if err := n.await(f); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrIndeterminate, name, err)
		}
		failpoint.Inject(failpoint.ConsensusAfterCommitBeforeAck)
		return unwrapResponse(f.Response())
	}, nil
}

// errShutDown is await's error for a future raft abandoned at shutdown.
var errShutDown = errors.New("raft shut down before the entry was applied")

// await waits for f, or until raft has shut down, which abandons the
// futures of committed entries it had not applied yet (hashicorp/raft
// #498): without this a caller could wait on one forever. raft's futures
// offer no channel, so a goroutine waits on f; the goroutine of an
// abandoned future stays blocked, which only happens at shutdown. The
// goroutine per proposal left BenchmarkBindCommit/inmem within its noise
// (alternating test binaries, one and 64 clients).
func (n *Node) await(f raft.ApplyFuture) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-n.down:
		select {
		case err := <-done:
			return err
		default:
			return errShutDown
		}
	}
}

// propose is Apply's first half: it proposes m and returns a function
// that waits for the result. On the leader m is validated, stamped in
// place and encoded once, and the entry is enqueued before propose
// returns, so successive proposals from one goroutine keep their order
// and may be in flight together. A follower forwards synchronously
// (concurrent forwarded calls could reach the leader reordered), so its
// proposals complete one at a time.
func (n *Node) propose(ctx context.Context, m proto.Message) (func() (*kvrpb.RaftResult, error), error) {
	if n.IsLeader() {
		t, err := commandType(m)
		if err != nil {
			return nil, err
		}
		return n.proposeMessage(ctx, t, m)
	}
	data, err := Encode(m)
	if err != nil {
		return nil, err
	}
	return n.forwardData(ctx, data)
}

// proposeData proposes an entry its builder encoded and validated (the
// Batcher's KV-events entries, which need no stamp): the leader appends
// it as it is; a follower forwards it, and the leader validates it.
func (n *Node) proposeData(ctx context.Context, data []byte) (func() (*kvrpb.RaftResult, error), error) {
	if n.IsLeader() {
		return n.proposeEncoded(ctx, Type(data[0]).String(), data)
	}
	return n.forwardData(ctx, data)
}

// forwardData forwards an entry to the leader and returns its result as
// a wait function.
func (n *Node) forwardData(ctx context.Context, data []byte) (func() (*kvrpb.RaftResult, error), error) {
	if len(data) > n.cfg.MaxCommandBytes {
		return nil, fmt.Errorf("%w: %d bytes over %d", ErrTooLarge, len(data), n.cfg.MaxCommandBytes)
	}
	r, err := n.forward(ctx, data)
	return func() (*kvrpb.RaftResult, error) { return r, err }, nil
}

// timeout is ApplyTimeout, or less when ctx ends sooner.
func (n *Node) timeout(ctx context.Context) time.Duration {
	t := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		t = min(t, time.Until(dl))
	}
	return max(t, time.Millisecond)
}

// unwrapResponse turns the FSM's return value into a result or an error.
func unwrapResponse(v any) (*kvrpb.RaftResult, error) {
	switch r := v.(type) {
	case *kvrpb.RaftResult:
		return r, nil
	case error:
		return nil, r
	}
	return nil, fmt.Errorf("%w: unexpected FSM response %T", ErrHalted, v)
}

// Retryable reports whether err leaves a write worth retrying with the
// same request id: indeterminate, or refused before it was proposed
// because leadership is moving (or moving off a leader whose disk is
// full).
func Retryable(err error) bool {
	for _, e := range []error{ErrIndeterminate, ErrNoLeader, ErrNotReady, ErrForwardLoop, ErrDiskFull, raft.ErrNotLeader} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// ApplyRetry is Apply retried with backoff while the error is Retryable
// and ctx lasts. The command must carry a request id (or be idempotent by
// nature, like keep-alives), since an indeterminate attempt may have
// committed. A change of leader ends the backoff at once and resets it:
// the attempt that failed for want of a leader, or on the old one, is
// sent to the new one as soon as this node knows it.
func (n *Node) ApplyRetry(ctx context.Context, m proto.Message) (*kvrpb.RaftResult, error) {
	first := n.cfg.HeartbeatTimeout / 4
	backoff := first
	for {
		changed := n.leaderChange.changed()
		r, err := n.Apply(ctx, m)
		if err == nil || !Retryable(err) {
			return r, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		case <-changed:
			t.Stop()
			backoff = first
			continue
		case <-t.C:
		}
		backoff = min(2*backoff, n.cfg.ElectionTimeout)
	}
}
