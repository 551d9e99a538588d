package dispatch

import (
	"context"
	"fmt"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// Explanation is what the router sees of a request without routing it:
// its blocks, and each candidate rank's cached prefix.
type Explanation struct {
	BlockSize int
	Blocks    int
	// Text says the prompt was routed by text chunks, not token blocks.
	Text    bool
	Engines []EngineMatch
}

// EngineMatch is one candidate rank's cached prefix, in blocks per tier
// (text chunks when Explanation.Text).
type EngineMatch struct {
	Worker  routing.Worker
	Overlap routing.Overlap
}

// Explain runs the decision's candidates, hashing and matching steps for
// r, without choosing, booking or binding: operators use it to see what
// the index holds for a prompt.
func (d *Dispatcher) Explain(_ context.Context, r *Request) (*Explanation, error) {
	if err := d.validate(r); err != nil {
		return nil, err
	}
	ranks, known := d.engines.Workers(r.Model)
	if !known {
		return nil, fmt.Errorf("%w: %q", ErrModelNotFound, r.Model)
	}
	sc := d.scratch.Get().(*policy.Scratch)
	defer d.scratch.Put(sc)
	q := policy.Query{ID: r.ID, Model: r.Model, ISLTokens: promptTokens(r)}
	if err := d.prepareOn(sc, r, &q, &phases{start: d.cfg.Now()}, ranks, false); err != nil {
		return nil, err
	}
	out := &Explanation{BlockSize: sc.BlockSize(), Blocks: sc.Blocks(), Text: sc.Text}
	for _, c := range sc.Candidates() {
		out.Engines = append(out.Engines, EngineMatch{Worker: c.Info.Worker, Overlap: c.Overlap})
	}
	return out, nil
}
