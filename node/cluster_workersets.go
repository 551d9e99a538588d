package node

import (
	"context"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/consensus"
	"github.com/kvrouter/kvrouter/fleet"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// reserveEvery is how often the leader compares its worker sets with the
// replicated incumbents. A new set routes by the local first sighting
// until its record arrives, so the check is frequent; it costs a map walk.
const reserveEvery = 100 * time.Millisecond

// fsmIncumbents is the FSM's incumbents table as the worker sets' source
// of decisions (fleet.IncumbentSource).
type fsmIncumbents struct{ f *consensus.FSM }

var _ fleet.IncumbentSource = fsmIncumbents{}

func (s fsmIncumbents) Incumbent(k fleet.SetKey) (string, bool) {
	sum, ok := s.f.WorkerSetIncumbents().BySet[setIncumbentKey(k)]
	return sum, ok
}

func (s fsmIncumbents) Generation() uint64 { return s.f.WorkerSetIncumbents().Generation }

func setIncumbentKey(k fleet.SetKey) string {
	return consensus.IncumbentKey(k.Namespace, k.Component, k.Endpoint, k.Model, k.WorkerType)
}

// reserveSets keeps the replicated worker-set reservation in step with the
// ready leader's own sets until ctx ends. The leader's sets follow the
// record too, so their incumbent is the recorded one while the leader has
// engines of it, and otherwise its oldest remaining cohort (first
// sighting, or succession): the leader writes that. A recorded set the
// leader has no engine of left is released. Nothing is written before
// the plane has discovered the fleet, so a new leader does not hand a set
// on for engines it has not heard of yet.
func (c *cluster) reserveSets(ctx context.Context, plane *fleet.Plane, sets *fleet.WorkerSets, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !c.cn.Ready() || !plane.Discovered() {
			continue
		}
		c.reserveOnce(ctx, sets)
	}
}

// reserveOnce writes the differences between the leader's sets and the
// record, one entry per set.
func (c *cluster) reserveOnce(ctx context.Context, sets *fleet.WorkerSets) {
	rec := c.cn.FSM().WorkerSetIncumbents().BySet
	live := map[string]bool{}
	for _, st := range sets.Status() {
		key := setIncumbentKey(st.Key)
		live[key] = true
		if rec[key] == st.Incumbent.Checksum {
			continue
		}
		r := incumbentRecord(st.Key, st.Incumbent.Checksum)
		if !c.writeIncumbent(ctx, r, false) {
			return
		}
		c.log.Info("worker set incumbent replicated", "model", st.Key.Model, "worker_type", st.Key.WorkerType,
			"checksum", st.Incumbent.Checksum, "previous_checksum", rec[key])
	}
	for key := range rec {
		if live[key] {
			continue
		}
		f := strings.Split(key, "\x00")
		if len(f) != 5 {
			continue
		}
		k := fleet.SetKey{Namespace: f[0], Component: f[1], Endpoint: f[2], Model: f[3], WorkerType: f[4]}
		if !c.writeIncumbent(ctx, incumbentRecord(k, ""), true) {
			return
		}
	}
}

func incumbentRecord(k fleet.SetKey, checksum string) *kvrpb.RaftIncumbent {
	return &kvrpb.RaftIncumbent{Namespace: k.Namespace, Component: k.Component, Endpoint: k.Endpoint,
		Model: k.Model, WorkerType: k.WorkerType, Checksum: checksum}
}

// writeIncumbent proposes one record and reports whether it was applied.
func (c *cluster) writeIncumbent(ctx context.Context, r *kvrpb.RaftIncumbent, unset bool) bool {
	wctx, cancel := context.WithTimeout(ctx, resyncTimeout)
	defer cancel()
	if _, err := c.cn.SetIncumbent(wctx, newRequestID(), r, unset); err != nil {
		c.log.Warn("replicating a worker-set incumbent", "model", r.Model, "unset", unset, "err", err)
		return false
	}
	return true
}
