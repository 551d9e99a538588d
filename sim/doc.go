// Package sim replays request traces on a virtual clock through kvrouter's
// real routing code (routing/index, routing/load, routing/policy) and
// simulated engines (mocker), and reports how each routing policy fares:
// prefix-cache hit ratio against three references (infinite cache, pooled
// capacity, clairvoyant placement), TTFT, ITL, load balance and
// throughput. Package gen generates workloads and package report draws a
// comparison as HTML.
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
// and completions end the booking as a node's frontend does (with
// Config.TrackOutputBlocks each running request's generated tokens are
// reported after every iteration, as a node reports streamed chunks, and
// with Config.OutputHints each request carries its trace output length as
// its osl hint), and once per
// Config.ReportInterval the router takes every engine's load report, as a
// node receives heartbeats. With KV events off the router runs in approximate mode instead:
// it records its own decisions in a TTL index (or, with
// Config.ApproxPolicy, an LRU model of each engine's cache at its
// capacity) and never sees the engines' caches. Nothing here copies a decision step: a change to the router's
// decisions shows in the simulation.
//
// Disaggregated replay. With Config.PrefillEngines the first engines are
// prefill engines and the others decode engines, and each arrival is
// routed by the node's two-hop decision (policy.Disagg, disagg.go): a
// one-token prefill on the prefill engine, then, when it is done, the
// decode on the chosen decode engine, which first receives the prompt's
// cache (the mocker's transfer time). TTFT runs from the arrival to the
// decode engine's first token; ITL is the decode engine's; the hit ratio
// and the load balance are the prefill engines'.
//
// References. Every Result carries the policy's share of three hit-ratio
// references of the workload, computed once per Compare
// (NewReferences), all counting hits as the engines do (a prompt always
// computes its last token):
//   - the infinite-cache bound: a block seen in any earlier prompt hits;
//   - pooled capacity (PooledLRU): one cache of Engines × Engine.NumBlocks
//     blocks with the engines' LRU eviction, blocks released tail first;
//   - clairvoyant placement (Oracle): Engines caches of Engine.NumBlocks
//     each; a prompt goes to the engine with its longest cached prefix
//     among those within 10% (plus the prompt) of the fleet's mean prefill
//     work, ties to the engine whose first eviction victim is needed
//     latest, then to the least loaded; each engine evicts the block whose
//     next use anywhere in the trace is furthest (Belady), and blocks whose
//     recorded next use went to another engine are re-dated every 64
//     prompts. It is greedy, not a bound.
//
// Both finite references serve the prompts one after the other in arrival
// order: they ignore time (a block is reusable as soon as its prompt
// arrived), blocks held by running requests, and load beyond the oracle's
// balance rule.
//
// Per-decision trace. Each Result's Detail holds one Record per request
// (the longest prefix any engine held at the decision, the chosen one's,
// the hit at admission, the pooled reference's hit, the prefix computed
// anywhere by then) and a timeline of the engines' load reports every
// SampleInterval; Losses splits the pooled reference's hits that the
// policy missed into not computed, evicted, overridden and queued.
// docs/routing-quality.md reads them.
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
