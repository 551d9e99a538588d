package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/routing"
)

// raftBindings is the dispatcher's session store over the cluster's
// replicated one. consensus.Sessions has the method set of
// dispatch.Bindings; this adapter maps its errors to the dispatcher's
// sentinels and makes engine invalidation the leader's job.
type raftBindings struct {
	s  *consensus.Sessions
	cn *consensus.Node
}

var _ dispatch.Bindings = raftBindings{}

func mapSessionErr(err error) error {
	switch {
	case errors.Is(err, consensus.ErrSessionLimit):
		return fmt.Errorf("%w: %w", dispatch.ErrSessionLimit, err)
	case errors.Is(err, consensus.ErrDiskFull):
		return fmt.Errorf("%w: %w", dispatch.ErrStoreFull, err)
	}
	return err
}

func (b raftBindings) Lookup(ctx context.Context, key string, now time.Time) (dispatch.Binding, bool, error) {
	v, ok, err := b.s.Lookup(ctx, key, now)
	return v, ok, mapSessionErr(err)
}

func (b raftBindings) Acquire(ctx context.Context, key string, version uint64, now time.Time) (bool, error) {
	ok, err := b.s.Acquire(ctx, key, version, now)
	return ok, mapSessionErr(err)
}

func (b raftBindings) Release(ctx context.Context, key string, version uint64, now time.Time) error {
	return mapSessionErr(b.s.Release(ctx, key, version, now))
}

func (b raftBindings) Bind(ctx context.Context, key string, w routing.Worker, expect uint64, now time.Time) (dispatch.Binding, bool, error) {
	v, ok, err := b.s.Bind(ctx, key, w, expect, now)
	return v, ok, mapSessionErr(err)
}

func (b raftBindings) Invalidate(ctx context.Context, key string, version uint64) (bool, error) {
	ok, err := b.s.Invalidate(ctx, key, version)
	return ok, mapSessionErr(err)
}

func (b raftBindings) Unbind(ctx context.Context, key string) error {
	return mapSessionErr(b.s.Unbind(ctx, key))
}

// InvalidateEngine drops the bindings of an engine that left. Every node's
// registry notices the departure, but only the leader writes it: one entry
// instead of one per node. A follower that noticed first still routes
// correctly, since the dispatcher invalidates a binding to an engine it
// does not know, by version, when the session's next request arrives.
func (b raftBindings) InvalidateEngine(ctx context.Context, id routing.WorkerID) (int, error) {
	if !b.cn.Ready() {
		return 0, nil
	}
	n, err := b.s.InvalidateEngine(ctx, id)
	return n, mapSessionErr(err)
}

func (b raftBindings) Len() int { return b.s.Len() }

// Authoritative implements dispatch.Authoritative: the cluster's bindings
// are decided by compare-and-set through raft, so the dispatcher binds a
// new session before dispatching its first request.
func (raftBindings) Authoritative() bool { return true }
