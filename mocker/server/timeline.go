package server

import (
	"slices"
	"time"

	"github.com/kvrouter/kvrouter/mocker"
)

// change is one event of an Advance that starts or stops a request's
// per-iteration token credit.
type change struct {
	at       time.Time
	id       string
	decoding bool
	first    bool
}

// timeline orders the first tokens, preemptions and readmissions of one
// Advance by time. A preemption stops the credit: the request is
// recomputed from scratch. A readmission restarts it for a request that
// had produced tokens, because the recompute ends by sampling the next
// token; for a long recompute spanning several iterations this credits
// tokens slightly early, which the MaxTokens-1 cap bounds. A first token
// starts it.
func timeline(res *mocker.StepResult) []change {
	var out []change
	for _, p := range res.Preempted {
		out = append(out, change{at: p.At, id: p.ID})
	}
	for _, a := range res.Admitted {
		if a.Readmission {
			out = append(out, change{at: a.At, id: a.ID, decoding: true})
		}
	}
	for _, f := range res.FirstTokens {
		out = append(out, change{at: f.At, id: f.ID, decoding: true, first: true})
	}
	slices.SortStableFunc(out, func(a, b change) int { return a.at.Compare(b.at) })
	return out
}

// apply records the change on the request's driver-side state.
func (c change) apply(p *pending) {
	switch {
	case c.first:
		p.decoding = true
		p.announce(max(p.emitted, 1))
	case c.decoding:
		p.decoding = p.emitted > 0
	default:
		p.decoding = false
	}
}
