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

// The package does not import fleet, so that fleet can import it; fleet's
// Index and RunIndex have these methods.
var _ Sink = (*index.Exact)(nil)
