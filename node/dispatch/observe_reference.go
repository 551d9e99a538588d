package dispatch

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// decisionCounters records the counters behind the reference router's
// requests_started, non_max_overlap_selections and rejection families.
// The per-decision children are cached per model, as the hit rate's are,
// so that a decision does no label lookup; nil without metrics.
type decisionCounters struct {
	m      *metrics.Decisions
	models *perModel[*modelCounters]
}

type modelCounters struct {
	routed, nonMax prometheus.Counter
}

func newDecisionCounters(m *metrics.Metrics) *decisionCounters {
	if m == nil {
		return nil
	}
	dm := m.Decisions()
	return &decisionCounters{m: dm, models: newPerModel(func(model string) *modelCounters {
		return &modelCounters{routed: dm.Routed.WithLabelValues(model), nonMax: dm.NonMaxOverlap.WithLabelValues(model)}
	})}
}

// decided counts a decision, and a non-max-overlap one when a candidate
// held more of the prompt than the chosen engine's cached blocks.
func (c *decisionCounters) decided(model string, cands []policy.Candidate, cached int) {
	if c == nil {
		return
	}
	mc := c.models.get(model)
	mc.routed.Inc()
	for i := range cands {
		if int(cands[i].Overlap.Device) > cached {
			mc.nonMax.Inc()
			return
		}
	}
}

// rejected counts an overload refusal by its reason; other errors are
// not rejections.
func (c *decisionCounters) rejected(model string, err error) {
	if c == nil || !errors.Is(err, ErrOverloaded) {
		return
	}
	reason := "all_workers_overloaded"
	var pc *PolicyClassError
	switch {
	case errors.As(err, &pc):
		reason = pc.Reason()
	case errors.Is(err, policy.ErrPinnedWorkerOverloaded):
		reason = "pinned_worker_overloaded"
	}
	c.m.Rejections.WithLabelValues(model, reason).Inc()
}
