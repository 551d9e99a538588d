package vllmevents

import (
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
)

// Sink receives a worker's routing events, in id order. The ids are the
// subscriber's own: contiguous from the sink's cursor for the worker at
// start. *index.Exact and every fleet.Index satisfy it; a sink that also
// implements RunSink takes a batch's events in one call. Events and their
// slices are not reused after the call: a sink may keep them.
type Sink interface {
	Apply(ev *routing.Event) error
	Cursor(w routing.Worker) (uint64, bool)
}

// RunSink is a Sink that applies a run of one worker's events at once, up
// to the first it cannot apply, and reports how many it took; fleet's
// raft-backed index proposes a run as one entry.
type RunSink interface {
	ApplyRun(events []routing.Event) (int, error)
}

// GatedSink is a Sink that takes events only at times (a raft cluster's
// leader, fleet.Gate): while Accepting reports false it drops them, and
// its cursor is another writer's. Each time the gate opens, the
// subscriber compares that cursor with its own ids and resyncs the worker
// when they differ, so that batches dropped at the gate (or proposed by a
// leader that lost them) come back from the engine's replay buffer even
// when the engine publishes nothing more.
type GatedSink interface {
	Sink
	Accepting() bool
}

// The package does not import fleet, so that fleet can import it; fleet's
// Index and RunIndex have these methods.
var _ Sink = (*index.Exact)(nil)
