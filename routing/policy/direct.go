package policy

import "fmt"

// Direct dispatches to the worker the request names (Request.Pin), as set
// by an external endpoint picker. With Pin.AnyRank it takes the least
// loaded rank of that worker. It is stateless and safe for concurrent use.
type Direct struct{}

var _ Selector = Direct{}

// Name implements Selector.
func (Direct) Name() string { return NameDirect }

// Select implements Selector. A request without a pin is ErrNoPinnedWorker;
// a pin matching no candidate is ErrPinnedWorkerNotFound.
func (Direct) Select(d *Decision, req *Request, cands []Candidate) error {
	d.reset()
	p := req.Pin
	if p == nil {
		return ErrNoPinnedWorker
	}
	best := leastLoaded(cands, func(c *Candidate) bool { return p.matches(c.Info.Worker) })
	if best < 0 {
		return fmt.Errorf("%w: worker %d rank %d", ErrPinnedWorkerNotFound, p.Worker, p.Rank)
	}
	d.choose(cands, best, "pinned")
	return nil
}
