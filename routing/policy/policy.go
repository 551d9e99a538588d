package policy

// Filter narrows the candidates of a request. Implementations append the
// candidates of cands that pass to dst (which never aliases cands) and
// return the extended slice. A filter that leaves nothing returns an error
// saying why, so that the caller can tell "cannot serve" from "busy".
type Filter interface {
	// Name identifies the filter in logs and metrics.
	Name() string
	Filter(dst []Candidate, req *Request, cands []Candidate) ([]Candidate, error)
}

// Selector picks one candidate. It writes the choice and its diagnostics to
// d, reusing d's buffers. It returns an error wrapping
// ErrNoCompatibleWorker for an empty candidate list.
type Selector interface {
	// Name is the name the selector is registered under.
	Name() string
	Select(d *Decision, req *Request, cands []Candidate) error
}
