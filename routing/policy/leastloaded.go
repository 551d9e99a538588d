package policy

import "fmt"

// LeastLoaded picks the candidate with the fewest active requests, the
// earliest on a tie. It is stateless and safe for concurrent use.
type LeastLoaded struct{}

var _ Selector = LeastLoaded{}

// Name implements Selector.
func (LeastLoaded) Name() string { return NameLeastLoaded }

// Select implements Selector.
func (LeastLoaded) Select(d *Decision, _ *Request, cands []Candidate) error {
	d.reset()
	if len(cands) == 0 {
		return fmt.Errorf("%w: no candidates", ErrNoCompatibleWorker)
	}
	d.choose(cands, leastLoaded(cands, -1, nil), "least-loaded")
	return nil
}
