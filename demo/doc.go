// Package demo runs kvrouter's live demonstration on loopback: an embedded
// NATS server, one router node and simulated engines (mocker processes run
// in-process on their own ports), with a real HTTP client replaying the
// bundled Mooncake trace through the node's OpenAI-compatible API, once per
// routing policy on a fresh fleet, and a report of what the client saw:
// cache hit ratio (from the engines' usage.prompt_tokens_details), TTFT
// percentiles and throughput.
//
// Time is compressed: arrivals come Compress times faster than in the trace
// and the engines' timing model runs Compress times faster too, so the load
// relative to capacity is the trace's own.
//
// Serve mode leaves one fleet running for curl or any OpenAI client.
//
// Concurrency: Run owns every goroutine it starts and returns only after
// they have stopped.
package demo
