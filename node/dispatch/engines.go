package dispatch

import (
	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// Engines is what the dispatcher needs of the engine registry. The node's
// event plane implements it; tests use a hand-written fake.
//
// Concurrency: every method is called concurrently from request
// goroutines and must be safe for that. Workers is on the hot path: it
// should not allocate, e.g. by returning a per-model slice that the
// registry replaces (copy on write) rather than mutates.
type Engines interface {
	// Workers returns the live ranks serving model and whether the model is
	// known at all (served by some registered engine, live or not). The
	// dispatcher reads the slice and never modifies or retains it.
	Workers(model string) (ranks []routing.WorkerInfo, known bool)
	// Endpoint returns an engine's OpenAI-compatible base URL (no /v1).
	Endpoint(id routing.WorkerID) (string, bool)
	// Models lists the models served by live engines, for /v1/models.
	Models() []Model
}

// LoadReporter is optionally implemented by an Engines: the load each rank
// last reported (in its heartbeat), which the projection combines with the
// node's own bookings as policy.LoadReporter says.
type LoadReporter = policy.LoadReporter
