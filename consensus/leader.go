package consensus

import (
	"context"
	"time"

	"github.com/kvrouter/kvrouter/internal/failpoint"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// leaderLoop runs while the node leads: it waits for a barrier (every
// entry of earlier terms applied locally, so binds judge against complete
// state), sets readiness, then proposes expiries every ExpiryInterval.
// Readiness is reset by watchLeadership when leadership ends.
func (n *Node) leaderLoop(ctx context.Context) {
	failpoint.Inject(failpoint.LeaderBeforeBarrier)
	if !n.barrier(ctx) {
		return
	}
	failpoint.Inject(failpoint.LeaderAfterBarrierBeforeReady)
	n.epoch.Add(1)
	n.ready.Store(true)
	n.leaderChange.fire() // writes waiting for readiness (awaitReady)
	term := n.raft.Stats()["term"]
	n.log.Info("leader ready", "term", term, "index", n.fsm.AppliedIndex())
	t := time.NewTicker(n.cfg.ExpiryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n.expireOnce(ctx)
		}
	}
}

// barrier retries raft's barrier until it succeeds, leadership ends or ctx
// is done, and reports whether it succeeded.
func (n *Node) barrier(ctx context.Context) bool {
	for ctx.Err() == nil && n.IsLeader() {
		err := n.raft.Barrier(n.cfg.BarrierTimeout).Error()
		if err == nil {
			return ctx.Err() == nil
		}
		n.log.Warn("leader barrier failed", "err", err)
	}
	return false
}

// expireOnce proposes the expiry of the bindings whose deadline has
// passed on the leader's clock, at most MaxRefsPerEntry per entry.
func (n *Node) expireOnce(ctx context.Context) {
	refs := n.fsm.Expired(n.cfg.Now().UnixNano(), MaxRefsPerEntry)
	if len(refs) == 0 {
		return
	}
	res, err := n.Apply(ctx, &kvrpb.RaftExpireSessions{Sessions: refs})
	if err != nil {
		n.log.Warn("proposing expiries", "sessions", len(refs), "err", err)
		return
	}
	n.log.Debug("expired bindings", "count", res.GetCount(), "index", res.GetIndex())
}
