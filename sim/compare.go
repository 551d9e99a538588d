package sim

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/kvrouter/kvrouter/traces"
)

// Compare synthesises the trace's prompts once and replays them through each
// policy, in parallel up to GOMAXPROCS. Results come back in policy order.
func Compare(ctx context.Context, reqs []traces.Request, policies []string, cfg Config) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(policies) == 0 {
		return nil, fmt.Errorf("%w: policies: at least one is required", ErrConfig)
	}
	w, err := NewWorkload(cfg.withDefaults().BlockSize)
	if err != nil {
		return nil, err
	}
	prompts := w.Prompts(reqs)
	bound := InfiniteCacheBound(prompts)
	out := make([]Result, len(policies))
	errs := make([]error, len(policies))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, name := range policies {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = Run(ctx, prompts, name, bound, cfg)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
