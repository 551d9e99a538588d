package policy

import "fmt"

// PinFilter keeps only the request's pinned worker (and rank), after
// checking that it exists among the candidates. A request without a pin
// keeps all. Run it after AllowedFilter, so that a pin outside the allowed
// set is refused.
type PinFilter struct{}

var _ Filter = PinFilter{}

// Name implements Filter.
func (PinFilter) Name() string { return "pin" }

// Filter implements Filter. It returns ErrPinnedWorkerNotFound when no
// candidate is the pinned engine, and ErrPinnedRankOutOfRange when the
// engine is there but not the pinned rank.
func (PinFilter) Filter(dst []Candidate, req *Request, cands []Candidate) ([]Candidate, error) {
	p := req.Pin
	if p == nil {
		return append(dst, cands...), nil
	}
	n, engine := len(dst), false
	for i := range cands {
		w := cands[i].Info.Worker
		engine = engine || w.ID == p.Worker
		if p.matches(w) {
			dst = append(dst, cands[i])
		}
	}
	switch {
	case len(dst) > n:
		return dst, nil
	case engine:
		return dst, fmt.Errorf("%w: worker %d has no rank %d", ErrPinnedRankOutOfRange, p.Worker, p.Rank)
	default:
		return dst, fmt.Errorf("%w: worker %d", ErrPinnedWorkerNotFound, p.Worker)
	}
}
