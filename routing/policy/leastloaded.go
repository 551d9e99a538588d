package policy

// LeastLoaded picks the candidate with the fewest active requests (the
// reference's "fewest active connections"); among those, the one holding
// the fewest decode blocks, then the earliest. The second key is
// kvrouter's: equal request counts say nothing of the decode work behind
// them, which the blocks measure (with output-block tracking they grow as
// the requests generate). It is stateless and safe for concurrent use.
type LeastLoaded struct{}

var _ Selector = LeastLoaded{}

// Name implements Selector.
func (LeastLoaded) Name() string { return NameLeastLoaded }

// Select implements Selector.
func (LeastLoaded) Select(d *Decision, _ *Request, cands []Candidate) error {
	if err := d.start(cands); err != nil {
		return err
	}
	d.choose(cands, fewestActive(cands), "least-loaded")
	return nil
}

// fewestActive returns the candidate with the fewest active requests, then
// the fewest decode blocks, then the earliest.
func fewestActive(cands []Candidate) int {
	best := 0
	for i := 1; i < len(cands); i++ {
		a, b := cands[i].Load, cands[best].Load
		if a.ActiveRequests < b.ActiveRequests || a.ActiveRequests == b.ActiveRequests && a.DecodeBlocks < b.DecodeBlocks {
			best = i
		}
	}
	return best
}
