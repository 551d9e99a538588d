package demo

import (
	"time"

	"github.com/kvrouter/kvrouter/sim/gen"
	"github.com/kvrouter/kvrouter/traces"
)

// The comparison's workload and fleet. Multi-turn chat is where prefix
// reuse decides TTFT: every turn resends its conversation, so a turn
// routed to the engine that served the previous one skips the prefill of
// everything but the new message. The think time is a sixth of the
// published chat workload's (gen.DefaultChat) and the conversation rate
// half, so that about 260 requests of real reuse fit in 140 trace seconds
// with four engines busy, not saturated; the engines' caches
// (NumBlocks) hold about the active conversations of a quarter of the
// fleet's traffic each, so that a policy that scatters a conversation over
// the engines pays in evictions, as on a real fleet.
const (
	// WorkloadSeed fixes the generated conversations.
	WorkloadSeed = 1
	// DefaultNumBlocks is each engine's KV capacity in 64-token blocks.
	DefaultNumBlocks = 1024
)

// ChatWorkload returns the comparison's workload: gen.DefaultChat with a
// minute of conversation starts at 1 per second, 5 turns on average
// and 5 s between turns, at WorkloadSeed.
func ChatWorkload() ([]traces.Request, error) {
	c := gen.DefaultChat()
	c.Duration, c.SessionsPerSecond, c.MeanTurns, c.ThinkTime = time.Minute, 1, 5, 5*time.Second
	return c.Generate(WorkloadSeed)
}
