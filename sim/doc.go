// Package sim replays request traces on a virtual clock through kvrouter's
// real routing code (routing/index, routing/load, routing/policy) and
// simulated engines (mocker), and reports how each routing policy fares:
// prefix-cache hit ratio against the trace's infinite-cache bound, TTFT,
// ITL, load balance and throughput.
//
// Model. Arrivals come from the trace (optionally compressed by a rate
// scale). Each arrival is routed exactly as a router node would route it:
// the exact index gives every engine's cached prefix, the load tracker
// projects each engine's load with the request, and the policy pipeline
// (filters, then selector) picks an engine. The request is booked in the
// tracker and submitted to the engine. Engines run continuous batching on
// the virtual clock; their KV events flow back into the index when the
// iteration that produced them ends, their first tokens complete the
// tracker's prefill accounting and their completions free it. With KV events
// off the router runs in approximate mode instead: it records its own
// decisions in a TTL index and never sees the engines' caches.
//
// Determinism. For a given workload, configuration and seed, every figure of
// a Result is reproducible except the routing decision times, which are
// wall-clock measurements of this machine. Prompts are synthesised from the
// trace's hash ids (see Workload), so a run needs nothing but the trace.
//
// Concurrency. Run is single-threaded and may be called from several
// goroutines at once (each call owns its router and engines); Compare runs
// one policy per goroutine, up to GOMAXPROCS at a time.
package sim
