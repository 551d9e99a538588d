package sim

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/kvrouter/kvrouter/routing/policy"
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
	c := cfg.withDefaults()
	refs := NewReferences(prompts, c.Engines, c.Engine.NumBlocks, c.BlockSize)
	out := make([]Result, len(policies))
	errs := make([]error, len(policies))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, name := range policies {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = Run(ctx, prompts, name, refs, cfg)
			out[i].Recommended = name == Recommended
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

// Recommended is the policy the README recommends; its rows carry
// Result.Recommended.
const Recommended = policy.NameKVTTFT

// Policies lists every policy a replay can run: every selector but
// direct, which needs a pin on every request.
func Policies() []string {
	var out []string
	for _, n := range policy.Names() {
		if n != policy.NameDirect {
			out = append(out, n)
		}
	}
	return out
}
