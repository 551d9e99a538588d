package node

import (
	"context"

	"github.com/kvrouter/kvrouter/fleet"
	"github.com/kvrouter/kvrouter/fleet/declared"
	"github.com/kvrouter/kvrouter/fleet/vllmevents"
	"github.com/kvrouter/kvrouter/routing"
)

// gatedSink lets only a node whose index accepts writes (a cluster's
// leader) apply a declared engine's KV events; elsewhere they are dropped
// and the cursor is the replicated one. It is a vllmevents.GatedSink, so
// that when this node becomes the leader its subscriber compares the
// replicated cursor with its own and resyncs the engine from the engine's
// replay buffer if they differ. It passes runs on whole, so that a batch
// is proposed as one raft batch, not one per event.
type gatedSink struct {
	idx  fleet.Index
	gate fleet.Gate
}

var (
	_ vllmevents.RunSink   = gatedSink{}
	_ vllmevents.GatedSink = gatedSink{}
)

// Accepting implements vllmevents.GatedSink.
func (g gatedSink) Accepting() bool { return g.gate.Accepting() }

func (g gatedSink) Apply(ev *routing.Event) error {
	if !g.gate.Accepting() {
		return nil
	}
	return g.idx.Apply(ev)
}

// ApplyRun implements vllmevents.RunSink: the index's own runs when it
// has them (raftIngest does), else one event at a time.
func (g gatedSink) ApplyRun(events []routing.Event) (int, error) {
	if !g.gate.Accepting() {
		return len(events), nil
	}
	if r, ok := g.idx.(fleet.RunIndex); ok {
		return r.ApplyRun(events)
	}
	for i := range events {
		if err := g.idx.Apply(&events[i]); err != nil {
			return i, err
		}
	}
	return len(events), nil
}

func (g gatedSink) Cursor(w routing.Worker) (uint64, bool) { return g.idx.Cursor(w) }

// engineEvents returns what follows a declared rank's KV events into idx
// (declared.Config.Events), or nil when the node ingests none.
func (n *Node) engineEvents(idx fleet.Index) (func(ctx context.Context, w routing.Worker, sp declared.Spec), error) {
	if idx == nil {
		return nil, nil
	}
	var sink vllmevents.Sink = idx
	if g, ok := idx.(fleet.Gate); ok {
		sink = gatedSink{idx: idx, gate: g}
	}
	m, err := vllmevents.NewMetrics(n.metrics.Registerer())
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, w routing.Worker, sp declared.Spec) {
		log := n.log.With("worker", w.String(), "engine", sp.URL)
		s, err := vllmevents.New(vllmevents.Config{Worker: w, Endpoint: sp.KVEvents, ReplayEndpoint: sp.Replay,
			ReplayTimeout: sp.ReplayTimeout, BlockSize: int(sp.BlockSize)}, sink, m, log)
		if err != nil {
			log.Error("engine KV events not followed", "err", err)
			return
		}
		if err := s.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("engine KV event subscription stopped", "err", err)
		}
	}, nil
}
