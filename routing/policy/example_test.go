package policy_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/load"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// Example routes one request with loads projected by routing/load: worker 1
// holds the request's first 6 blocks but is busy prefilling another prompt,
// worker 2 is idle with nothing cached. Worker 1 costs (320+160)/16 - 6 = 24
// prefill blocks plus 20+10 decode blocks; worker 2 costs 10 + 10.
func Example() {
	const bs = 16
	tr, _ := load.New(load.DefaultConfig(bs))
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	other, _ := routing.BlockHashes(nil, seq(100, 320), bs, routing.HashSeed)
	_ = tr.Add(load.Request{ID: "other", Worker: routing.Worker{ID: 1}, Hashes: other, ISLTokens: 320}, now)

	prompt := seq(0, 160)
	hashes, _ := routing.BlockHashes(nil, prompt, bs, routing.HashSeed)
	matches := []routing.Match{
		{Worker: routing.Worker{ID: 1}, Overlap: routing.Overlap{Device: 6}},
		{Worker: routing.Worker{ID: 2}},
	}
	loads, _ := tr.Potential(nil, load.Query{Hashes: hashes, ISLTokens: len(prompt)}, matches)

	cands := make([]policy.Candidate, len(matches))
	for i, m := range matches {
		cands[i] = policy.Candidate{
			Info:    routing.WorkerInfo{Worker: m.Worker, BlockSize: bs, TotalBlocks: 1000},
			Overlap: m.Overlap,
			Load:    loads[i],
			Active:  tr.Active(m.Worker),
		}
	}
	kv, _ := policy.NewKV(policy.DefaultKVConfig(), rand.New(rand.NewPCG(1, 1)))
	p, _ := policy.NewPipeline(policy.Thresholds{}, kv)
	var d policy.Decision
	if err := p.Route(&d, &policy.Request{ISLTokens: len(prompt), BlockSize: bs}, cands); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("costs %v, chose worker %v (%s)\n", d.Costs, d.Worker, d.Reason)
	// Output: costs [54 20], chose worker 2/0 (argmin)
}

// seq returns n consecutive token ids starting at from.
func seq(from, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(from + i)
	}
	return out
}
