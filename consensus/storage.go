package consensus

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/store"
)

// ErrDiskFull is returned by Apply while this node's raft log store is
// below its free-space reserve (store.ErrDiskFull, which it wraps).
// Nothing was proposed; the write succeeds once space returns, on this
// node or on the leader that replaces it.
var ErrDiskFull = fmt.Errorf("consensus: %w", store.ErrDiskFull)

// diskReporter is a store that knows whether its disk is full
// (store.LogStore, store.FSMStore).
type diskReporter interface{ DiskFull() bool }

// storageHealth watches a node's stores for a full disk. A full node stops
// acknowledging: it refuses proposals with ErrDiskFull, reports itself
// not caught up (so not ready), and a full leader hands its leadership to
// a voter with room. The stores clear their state themselves on the first
// write that finds room again; a follower's appends are retried by the
// leader, so a node recovers without a restart.
type storageHealth struct {
	stores []diskReporter
	// corrupt counts corrupt snapshots found, and resnap is set while a
	// fresh snapshot replaces one (snapshot_check.go).
	corrupt *atomic.Uint64
	resnap  *atomic.Bool
	metrics *metrics.Storage
}

// newStorageHealth collects the stores of deps that report their disk.
func newStorageHealth(deps Deps) storageHealth {
	h := storageHealth{corrupt: new(atomic.Uint64), resnap: new(atomic.Bool)}
	if deps.Metrics != nil {
		h.metrics = deps.Metrics.Storage
	}
	for _, s := range []any{deps.LogStore, deps.State} {
		if r, ok := s.(diskReporter); ok {
			h.stores = append(h.stores, r)
		}
	}
	return h
}

// full reports whether any store found its disk full at its last write.
func (h storageHealth) full() bool { return slices.ContainsFunc(h.stores, diskReporter.DiskFull) }

// DiskFull reports whether one of the node's stores refuses writes for
// lack of space.
func (n *Node) DiskFull() bool { return n.health.full() }

// diskWatchInterval is how often a leader checks its disk: raft already
// steps a leader down when an append fails, but an idle leader appends
// nothing, and would keep a role it cannot fulfil until the next write.
const diskWatchInterval = 100 * time.Millisecond

// watchDisk hands the leadership away while the leader's disk is full.
// It stops with the node.
func (n *Node) watchDisk() {
	defer n.wg.Done()
	if len(n.health.stores) == 0 {
		return
	}
	t := time.NewTicker(diskWatchInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			if n.IsLeader() && n.health.full() {
				n.moveLeadership()
			}
		}
	}
}

// moveLeadership transfers the leadership off a leader with a full disk.
func (n *Node) moveLeadership() {
	ctx, cancel := n.untilStop(n.cfg.ElectionTimeout * 3)
	defer cancel()
	id, err := n.TransferLeadership(ctx)
	n.log.Warn("disk full: handing the leadership over", "to", id, "err", err)
}

// DiskFull reports whether the state's store found its disk full at its
// last commit.
func (s *StoreState) DiskFull() bool { return s.s.DiskFull() }

// untilStop returns a context that ends after d or when the node shuts
// down, whichever comes first, for the node's own background calls.
func (n *Node) untilStop(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
