package node

import (
	"context"
	"time"

	"github.com/kvrouter/kvrouter/fleet"
	"github.com/kvrouter/kvrouter/routing"
)

// reconcileStrikes is how many consecutive checks an engine must be
// missing from the registry before the leader removes its ownership.
const reconcileStrikes = 2

// reconcile reconciles the replicated ownership with the live fleet until
// ctx ends. The event plane removes an engine that stops heartbeating, but
// an engine that died while the whole cluster was down is never seen
// again, so nothing would remove it: after a full restart its blocks would
// stay in every node's index for good. The ready leader therefore compares
// the engines the index holds blocks of with the registry every interval
// and removes, through raft, those missing reconcileStrikes times in a
// row (the registry is complete once the plane has discovered the fleet).
func (c *cluster) reconcile(ctx context.Context, plane *fleet.Plane, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	strikes := map[routing.WorkerID]int{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !c.cn.Ready() || !plane.Discovered() {
			clear(strikes)
			continue
		}
		live := map[routing.WorkerID]bool{}
		for _, e := range plane.Registry().Engines() {
			live[e.ID] = true
		}
		held := map[routing.WorkerID]bool{}
		for _, w := range c.idx.Workers() {
			held[w.ID] = true
		}
		for id := range strikes {
			if !held[id] || live[id] {
				delete(strikes, id)
			}
		}
		for id := range held {
			if live[id] {
				continue
			}
			if strikes[id]++; strikes[id] < reconcileStrikes {
				continue
			}
			delete(strikes, id)
			rctx, cancel := context.WithTimeout(ctx, resyncTimeout)
			n, err := c.cn.RemoveWorker(rctx, id)
			cancel()
			if err != nil {
				c.log.Warn("reconciling ownership: removing an engine that is gone", "engine", id, "err", err)
				continue
			}
			c.log.Info("reconciled ownership: removed an engine that is gone", "engine", id, "rows", n)
		}
	}
}
