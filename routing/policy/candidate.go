package policy

import (
	"fmt"

	"github.com/kvrouter/kvrouter/routing"
)

// Candidate is one worker the request could go to, with the measurements
// the policies compare. See the package documentation for which load fields
// include the request.
type Candidate struct {
	// Info is what the worker advertises; Info.Worker identifies it.
	Info routing.WorkerInfo
	// Overlap is the request's cached prefix on the worker, per tier.
	Overlap routing.Overlap
	// SharedHits is the number of the request's blocks found in the DC's
	// shared KV store (the exact index's shared tier) at positions at or
	// beyond Overlap.Device; the Decider fills it (sharedHits, decide_match.go).
	SharedHits int32
	// Load is the potential load if the worker took the request.
	Load routing.Load
	// Active is the worker's current load, read by the busy thresholds.
	Active routing.Load
}

// Worker returns the candidate's worker.
func (c *Candidate) Worker() routing.Worker { return c.Info.Worker }

// validate rejects negative measurements, which no tracker or index
// produces and which would make costs meaningless.
func (c *Candidate) validate() error {
	o, l, a := c.Overlap, c.Load, c.Active
	if o.Device < 0 || o.Host < 0 || o.Disk < 0 || c.SharedHits < 0 ||
		l.PrefillTokens < 0 || l.DecodeBlocks < 0 || l.ActiveRequests < 0 ||
		a.PrefillTokens < 0 || a.DecodeBlocks < 0 || a.ActiveRequests < 0 {
		return fmt.Errorf("%w: candidate %v has a negative overlap or load", ErrInvalidRequest, c.Info.Worker)
	}
	return nil
}

// Decision is a selector's result plus the diagnostics metrics and traces
// want. It is caller-owned scratch: reuse one per goroutine and the
// selectors do not allocate.
type Decision struct {
	// Worker is the chosen worker.
	Worker routing.Worker
	// Index is the chosen candidate's index in the slice the selector saw
	// (Eligible after Pipeline.Route).
	Index int
	// Overlap is the chosen worker's cached prefix.
	Overlap routing.Overlap
	// Cost is the chosen worker's cost; only the kv selector sets it.
	Cost float64
	// Costs holds every candidate's cost in candidate order; only the kv
	// selector fills it, otherwise it is empty.
	Costs []float64
	// Reason names the rule that decided, e.g. "argmin", "sampled",
	// "load", "cache", "least-loaded", "pinned".
	Reason string
	// Eligible is the candidates that passed Pipeline.Route's filters. It
	// aliases the Decision's scratch and is valid until its next use.
	Eligible []Candidate

	scratch [2][]Candidate
}

// reset clears the result fields and keeps the buffers.
func (d *Decision) reset() {
	d.Worker, d.Index, d.Overlap, d.Cost, d.Reason = routing.Worker{}, -1, routing.Overlap{}, 0, ""
	d.Costs = d.Costs[:0]
}

// start resets d for a selection among cands; an empty list is
// ErrNoCompatibleWorker, as Selector requires.
func (d *Decision) start(cands []Candidate) error {
	d.reset()
	if len(cands) == 0 {
		return errNoCandidates
	}
	return nil
}

// errNoCandidates is the error of a selection without candidates.
var errNoCandidates = fmt.Errorf("%w: no candidates", ErrNoCompatibleWorker)

// choose records candidate i as the decision.
func (d *Decision) choose(cands []Candidate, i int, reason string) {
	d.Worker, d.Index, d.Overlap, d.Reason = cands[i].Info.Worker, i, cands[i].Overlap, reason
}
