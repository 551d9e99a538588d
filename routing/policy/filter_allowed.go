package policy

import "fmt"

// AllowedFilter keeps the candidates whose engine is in the request's
// allowed set; a request without an allowed set keeps all.
type AllowedFilter struct{}

var _ Filter = AllowedFilter{}

// Name implements Filter.
func (AllowedFilter) Name() string { return "allowed" }

// Filter implements Filter. It returns ErrNoCompatibleWorker when no
// candidate is allowed.
func (AllowedFilter) Filter(dst []Candidate, req *Request, cands []Candidate) ([]Candidate, error) {
	n := len(dst)
	for i := range cands {
		if req.allows(cands[i].Info.Worker.ID) {
			dst = append(dst, cands[i])
		}
	}
	if len(dst) == n {
		return dst, fmt.Errorf("%w: none of %d candidates is in the allowed set", ErrNoCompatibleWorker, len(cands))
	}
	return dst, nil
}
