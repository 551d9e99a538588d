package policy

import (
	"math"

	"github.com/kvrouter/kvrouter/routing"
)

// DeviceAwareConfig configures the device-aware-weighted selector.
type DeviceAwareConfig struct {
	// CPUWeight is the relative capacity of one CPU worker. Default 1.
	CPUWeight float64
	// AcceleratorWeight is the relative capacity of one non-CPU worker
	// (encoder_cuda_to_cpu_ratio). Default 8: an accelerator serves about
	// eight times the requests of a CPU worker before it is equally loaded.
	AcceleratorWeight float64
}

// DefaultDeviceAwareConfig returns the reference defaults.
func DefaultDeviceAwareConfig() DeviceAwareConfig {
	return DeviceAwareConfig{CPUWeight: 1, AcceleratorWeight: 8}
}

// Validate reports the first invalid weight, naming its key.
func (c DeviceAwareConfig) Validate() error {
	if !(c.CPUWeight > 0) || math.IsInf(c.CPUWeight, 1) {
		return configError("cpu_weight must be > 0 and finite, got %v", c.CPUWeight)
	}
	if !(c.AcceleratorWeight > 0) || math.IsInf(c.AcceleratorWeight, 1) {
		return configError("encoder_cuda_to_cpu_ratio must be > 0 and finite, got %v", c.AcceleratorWeight)
	}
	return nil
}

// DeviceAware splits the candidates into CPU and non-CPU groups, picks the
// group with the lower weighted load, sum of active requests divided by
// (count * weight), and then the least loaded worker inside it. On equal
// group loads the non-CPU group wins. It is stateless and safe for
// concurrent use.
type DeviceAware struct {
	cfg DeviceAwareConfig
}

var _ Selector = (*DeviceAware)(nil)

// NewDeviceAware returns a device-aware-weighted selector or an error
// wrapping ErrInvalidConfig.
func NewDeviceAware(cfg DeviceAwareConfig) (*DeviceAware, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &DeviceAware{cfg: cfg}, nil
}

// Name implements Selector.
func (*DeviceAware) Name() string { return NameDeviceAware }

// Select implements Selector; d.Reason is "cpu" or "accelerator".
func (s *DeviceAware) Select(d *Decision, _ *Request, cands []Candidate) error {
	if err := d.start(cands); err != nil {
		return err
	}
	cpu := s.groupLoad(cands, routing.DeviceCPU) < s.groupLoad(cands, routing.DeviceGPU)
	best := leastLoaded(cands, func(c *Candidate) bool { return (c.Info.Device == routing.DeviceCPU) == cpu })
	reason := "accelerator"
	if cpu {
		reason = "cpu"
	}
	d.choose(cands, best, reason)
	return nil
}

// groupLoad is a group's active requests per unit of weighted capacity;
// an empty group is infinitely loaded so the other one wins.
func (s *DeviceAware) groupLoad(cands []Candidate, kind routing.DeviceKind) float64 {
	var n, inflight int64
	for i := range cands {
		if isCPU := cands[i].Info.Device == routing.DeviceCPU; isCPU == (kind == routing.DeviceCPU) {
			n++
			inflight += cands[i].Load.ActiveRequests
		}
	}
	if n == 0 {
		return math.Inf(1)
	}
	w := s.cfg.AcceleratorWeight
	if kind == routing.DeviceCPU {
		w = s.cfg.CPUWeight
	}
	return float64(inflight) / (float64(n) * w)
}
