package dispatch

import (
	"sync"

	"github.com/kvrouter/kvrouter/routing/policy"
)

// runtimeThresholds are the busy thresholds set per model at run time
// (the admin API, replicated through the DC's raft log in a cluster);
// a model without an entry uses Config.Thresholds.
type runtimeThresholds struct {
	m sync.Map // model -> *policy.Thresholds
}

// get returns a model's thresholds, nil when it has none of its own.
func (r *runtimeThresholds) get(model string) *policy.Thresholds {
	v, ok := r.m.Load(model)
	if !ok {
		return nil
	}
	return v.(*policy.Thresholds)
}

// SetThresholds replaces a model's busy thresholds (nil: back to the
// configured ones). Requests routed after it returns use them; queued
// requests of the model are re-checked at once.
func (d *Dispatcher) SetThresholds(model string, th *policy.Thresholds) error {
	if th == nil {
		d.rt.m.Delete(model)
	} else {
		if err := th.Validate(); err != nil {
			return configError("%w", err)
		}
		c := *th
		d.rt.m.Store(model, &c)
	}
	if mq := d.queues.get(model); mq != nil {
		d.pump(mq)
	}
	return nil
}

// Thresholds returns a model's effective busy thresholds and whether they
// were set at run time.
func (d *Dispatcher) Thresholds(model string) (policy.Thresholds, bool) {
	if th := d.rt.get(model); th != nil {
		return *th, true
	}
	return d.cfg.Thresholds, false
}
