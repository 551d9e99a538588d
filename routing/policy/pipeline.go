package policy

import "fmt"

// Pipeline is the eligibility filters followed by a selector: the whole
// routing decision for one stage.
type Pipeline struct {
	// Filters run in order; each sees the survivors of the previous one.
	Filters []Filter
	// Selector picks among the survivors.
	Selector Selector
}

// NewPipeline returns the standard pipeline: allowed set, pin, then busy
// thresholds, then sel.
func NewPipeline(th Thresholds, sel Selector) (*Pipeline, error) {
	if err := th.Validate(); err != nil {
		return nil, err
	}
	if sel == nil {
		return nil, configError("selector must be set")
	}
	return &Pipeline{
		Filters:  []Filter{AllowedFilter{}, PinFilter{}, &BusyFilter{Thresholds: th}},
		Selector: sel,
	}, nil
}

// Route validates the request and candidates, runs the filters and the
// selector, and writes the decision to d; d.Eligible holds the survivors.
// An empty candidate list is ErrNoCompatibleWorker.
func (p *Pipeline) Route(d *Decision, req *Request, cands []Candidate) error {
	return p.RouteWith(d, req, cands, nil)
}

// RouteWith is Route with sel in place of p.Selector when sel is not nil.
func (p *Pipeline) RouteWith(d *Decision, req *Request, cands []Candidate, sel Selector) error {
	if sel == nil {
		sel = p.Selector
	}
	d.reset()
	d.Eligible = d.Eligible[:0]
	if sel == nil {
		return configError("selector must be set")
	}
	if err := req.Validate(); err != nil {
		return err
	}
	if len(cands) == 0 {
		return errNoCandidates
	}
	for i := range cands {
		if err := cands[i].validate(); err != nil {
			return err
		}
	}
	cur := cands
	for i, f := range p.Filters {
		next, err := f.Filter(d.scratch[i%2][:0], req, cur)
		d.scratch[i%2] = next
		if err != nil {
			return fmt.Errorf("filter %s: %w", f.Name(), err)
		}
		cur = next
	}
	d.Eligible = cur
	return sel.Select(d, req, cur)
}
