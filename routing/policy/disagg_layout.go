package policy

import (
	"fmt"
	"slices"

	"github.com/kvrouter/kvrouter/routing"
)

// Layout is a model's live ranks by role (routing.Role). It decides how
// the model serves a request (Serving), the one rule that the router node
// and the simulator both follow.
type Layout struct {
	Aggregated, Prefill, Decode []routing.WorkerInfo
}

// Split resets l and sorts ranks into it by role, keeping their order. It
// reuses l's slices.
func (l *Layout) Split(ranks []routing.WorkerInfo) {
	l.Aggregated, l.Prefill, l.Decode = l.Aggregated[:0], l.Prefill[:0], l.Decode[:0]
	for _, in := range ranks {
		switch in.Role {
		case routing.RolePrefill:
			l.Prefill = append(l.Prefill, in)
		case routing.RoleDecode:
			l.Decode = append(l.Decode, in)
		default:
			l.Aggregated = append(l.Aggregated, in)
		}
	}
}

// HasRoles reports whether any rank is a prefill or decode rank, so that
// the model must be served by Layout's rules rather than as aggregated.
func HasRoles(ranks []routing.WorkerInfo) bool {
	return slices.ContainsFunc(ranks, func(in routing.WorkerInfo) bool { return in.Role != routing.RoleAggregated })
}

// Serving says how a model serves a request.
type Serving uint8

// The ways of serving.
const (
	// ServeAggregated: one rank serves the whole request.
	ServeAggregated Serving = iota
	// ServeDisaggregated: a prefill rank computes the prompt's KV cache and
	// hands it off to a decode rank, which generates the answer.
	ServeDisaggregated
)

// String names the way of serving for logs and metrics.
func (s Serving) String() string {
	if s == ServeDisaggregated {
		return "disaggregated"
	}
	return "aggregated"
}

// Serving decides how the model serves a request and, when it is served
// whole, on which ranks (dst, appended to):
//   - prefill and decode ranks: disaggregated (no whole ranks);
//   - decode ranks and no prefill rank left: with fallback, whole requests
//     on the decode ranks and any aggregated ones, as the reference router
//     routes decode-only once its prefill workers are gone; without it,
//     ErrNoPrefillWorker;
//   - no decode rank: whole requests on the aggregated ranks. A prefill
//     rank never serves a whole request, since it hands its cache off
//     instead of decoding.
//
// The aggregated ranks of a model that has prefill and decode ranks serve
// only in the fallback: a model is served one way at a time.
func (l *Layout) Serving(fallback bool, dst []routing.WorkerInfo) (Serving, []routing.WorkerInfo, error) {
	switch {
	case len(l.Decode) > 0 && len(l.Prefill) > 0:
		return ServeDisaggregated, dst, nil
	case len(l.Decode) > 0 && fallback:
		return ServeAggregated, append(append(dst, l.Decode...), l.Aggregated...), nil
	case len(l.Decode) > 0:
		return ServeAggregated, dst, fmt.Errorf("%w: %d decode ranks and no prefill rank, and the decode fallback is off",
			ErrNoPrefillWorker, len(l.Decode))
	}
	return ServeAggregated, append(dst, l.Aggregated...), nil
}

// transferable reports whether a rank in domain a can hand its KV cache
// to one in domain b: either does not report a domain, or both report the
// same.
func transferable(a, b string) bool { return a == "" || b == "" || a == b }

// reachable appends to dst the ranks of from that can exchange KV caches
// with some rank of to.
func reachable(dst, from, to []routing.WorkerInfo) []routing.WorkerInfo {
	for _, f := range from {
		for _, t := range to {
			if transferable(f.TransferDomain, t.TransferDomain) {
				dst = append(dst, f)
				break
			}
		}
	}
	return dst
}

// inDomain appends to dst the ranks of from that can exchange KV caches
// with a rank of domain.
func inDomain(dst, from []routing.WorkerInfo, domain string) []routing.WorkerInfo {
	for _, f := range from {
		if transferable(f.TransferDomain, domain) {
			dst = append(dst, f)
		}
	}
	return dst
}
