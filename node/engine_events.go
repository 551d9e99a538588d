package node

import (
	"context"
	"fmt"
	"sync"

	"github.com/kvrouter/kvrouter/fleet"
	"github.com/kvrouter/kvrouter/fleet/declared"
	"github.com/kvrouter/kvrouter/fleet/vllmevents"
	"github.com/kvrouter/kvrouter/routing"
)

// gatedSink lets only a node whose index accepts writes (a cluster's
// leader) apply a declared engine's KV events; elsewhere they are dropped
// and the cursor is the replicated one, so that a node that becomes the
// leader finds its subscriber out of step and rebuilds the engine's state
// from the engine's replay buffer (vllmevents: a moved cursor is taken
// over with one clear).
type gatedSink struct {
	idx  fleet.Index
	gate fleet.Gate
}

func (g gatedSink) Apply(ev *routing.Event) error {
	if !g.gate.Accepting() {
		return nil
	}
	return g.idx.Apply(ev)
}

func (g gatedSink) Cursor(w routing.Worker) (uint64, bool) { return g.idx.Cursor(w) }

// startEngineEvents subscribes to the KV events of every declared rank
// that publishes them (kv-events=...), feeding idx, and returns what stops
// the subscriptions. Ranks found by DNS are not subscribed yet: their
// events need a subscriber that follows the DNS answers.
func (n *Node) startEngineEvents(ctx context.Context, idx fleet.Index) (func(), error) {
	var subs []*vllmevents.Subscriber
	var sink vllmevents.Sink = idx
	if g, ok := idx.(fleet.Gate); ok {
		sink = gatedSink{idx: idx, gate: g}
	}
	var m *vllmevents.Metrics
	for _, sp := range n.cfg.declared {
		if sp.KVEvents == "" || idx == nil {
			continue
		}
		if m == nil {
			var err error
			if m, err = vllmevents.NewMetrics(n.metrics.Registry); err != nil {
				return nil, err
			}
		}
		w := routing.Worker{ID: declared.EngineID(sp.URL), Rank: sp.DPRank}
		s, err := vllmevents.New(vllmevents.Config{Worker: w, Endpoint: sp.KVEvents, ReplayEndpoint: sp.Replay,
			BlockSize: int(sp.BlockSize)}, sink, m, n.log.With("worker", w.String(), "engine", sp.URL))
		if err != nil {
			return nil, fmt.Errorf("%w: engine %s: %w", ErrConfig, sp.URL, err)
		}
		subs = append(subs, s)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Go(func() {
			if err := s.Run(ctx); err != nil && ctx.Err() == nil {
				n.log.Error("engine KV event subscription stopped", "err", err)
			}
		})
	}
	return func() { cancel(); wg.Wait() }, nil
}
