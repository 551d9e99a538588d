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
	// source, when set, is the only source (WithThresholdSource).
	source func(model string) *policy.Thresholds
}

// WithThresholdSource makes source the runtime thresholds of every model
// (a cluster's replicated table), in place of SetThresholds. It is called
// on every request and must be cheap and safe for concurrent use.
func WithThresholdSource(source func(model string) *policy.Thresholds) Option {
	return func(d *Dispatcher) { d.rt.source = source }
}

// ThresholdsChanged tells the dispatcher that the source changed a
// model's thresholds: its queue is re-checked at once.
func (d *Dispatcher) ThresholdsChanged(model string) { d.pumpModel(model) }

// get returns a model's thresholds, nil when it has none of its own.
func (r *runtimeThresholds) get(model string) *policy.Thresholds {
	if r.source != nil {
		return r.source(model)
	}
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
	d.ThresholdsChanged(model)
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
