// Package sim replays request traces on a virtual clock through kvrouter's
// real routing code (routing/index, routing/load, routing/policy) and
// simulated engines (mocker), and reports how each routing policy fares:
// prefix-cache hit ratio against the trace's infinite-cache bound, TTFT,
// ITL, load balance and throughput.
//
// Model. Arrivals come from the trace (optionally compressed by a rate
// scale). Each arrival is routed by the router node's own decision path,
// policy.Decider, configured as a node configures it: the candidates
// minus suspects, the exact index's cached prefixes (merged with the
// predict-on-route side index when Config.PredictTTL is set), the load
// tracker's projection plus what the engines report beyond it, session
// affinity for prompts that carry a session (Config.AffinityTTL, an
// in-memory store), then the policy pipeline (filters, then selector) and
// the booking. The request is submitted to the engine. Engines run
// continuous batching on the virtual clock; their KV events flow back into
// the index when the iteration that produced them ends, their first tokens
// and completions end the booking as a node's frontend does, and once per
// Config.ReportInterval the router takes every engine's load report, as a
// node receives heartbeats. With KV events off the router runs in approximate mode instead:
// it records its own decisions in a TTL index and never sees the engines'
// caches. Nothing here copies a decision step: a change to the router's
// decisions shows in the simulation.
//
// Against the replay of earlier versions, which re-implemented matching,
// projection and selection without engine reports, round-robin is
// unchanged on the bundled trace and the kv policy sees a little less
// cache and a higher TTFT: over seeds 1-3 on four engines, mean TTFT 2.6,
// 3.3 and 3.3 s against 2.9, 2.6 and 2.8 s before. The mocker reports a
// waiting request's whole prompt as prefill work, more than the router
// books for it, and the node adds that excess to its projection, as it
// does for requests other router nodes sent. NoLoadReports turns the
// reports off (2.6, 2.5 and 2.6 s). The selectors' random tie-breaks now
// draw from the node's generator stream, so a seed gives the node's
// choices.
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
