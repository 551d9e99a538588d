// Package policy chooses the worker that serves a request: eligibility
// filters narrow the candidates, then a selector picks one of them. Both are
// small plugin interfaces (Filter, Selector), one implementation per file,
// and New builds a selector by its configuration name (or the reference's
// short name of it: "rr", "p2c").
//
// Selectors: "kv" (the KV cost model: cached prefix credit against prefill
// and decode load, argmin with uniform random tie-break or softmax sampling
// at a temperature), "two-tier" (load tier, then cache tier, then least
// loaded), "round-robin", "random", "power-of-two", "least-loaded",
// "device-aware-weighted" and "direct". Filters: the request's allowed
// workers, its pinned worker and rank, and the busy thresholds. Pipeline
// runs the filters and a selector and classifies failures.
//
// Inputs. A Candidate carries a worker's advertised WorkerInfo, its cached
// prefix (routing.Overlap, device depth plus the host and disk runs that
// continue it), its shared-cache hits and two loads, taken as values so
// that this package does not depend on how they were measured
// (routing/load computes both loads):
//   - SharedHits are the request's blocks in the DC's shared KV store
//     (routing.TierShared: a store outside any engine, such as SGLang
//     HiCache's L3 on Mooncake, whose blocks engines report under a shared
//     medium). A shared block is reachable by every engine whose prompt
//     has it, so the Decider computes the request's shared runs once
//     (index.Exact.SharedRanges) and gives each candidate the positions at
//     or beyond its own device prefix, as the reference's
//     shared_hits_beyond_device does; blocks below it are already credited
//     as device blocks. The kv cost model credits them at
//     KVConfig.SharedCacheMultiplier.
//   - Load is the potential load if the worker took this request:
//     Load.PrefillTokens and Load.DecodeBlocks include the request (its
//     uncached tokens, max(0, ISL - Overlap.Device*BlockSize), and its
//     blocks not already active on the worker); Load.ActiveRequests does not.
//   - Active is the worker's current load without the request. Only the
//     busy thresholds read it, because "busy" describes the worker as it is.
//
// The KV cost model needs the worker's active prefill without the request;
// it recovers it as Load.PrefillTokens minus the request's uncached tokens.
//
// Guarantees. Selection is deterministic given the injected *rand.Rand: the
// same inputs and seed give the same choice. Bad input (a negative size, an
// invalid configuration, an unknown policy name) yields an error wrapping one
// of the sentinels in errors.go; nothing here panics on input. The failure
// classes are distinct so the edge can map them to statuses: no compatible
// worker (ErrNoCompatibleWorker, ErrPinnedWorkerNotFound,
// ErrPinnedRankOutOfRange), overload (ErrAllWorkersOverloaded,
// ErrPinnedWorkerOverloaded) and bad request (ErrInvalidRequest,
// ErrNoPinnedWorker). A pinned request whose worker is busy is refused, never
// rerouted. Selectors do not allocate when the caller reuses its Decision.
//
// Decider. The filters and selectors are pure functions of their inputs.
// Decider (decide*.go) composes them into a router's whole decision path,
// the one implementation that the router node (node/dispatch) and the
// simulator (sim) both run: candidates at the model's block size minus the
// suspects (engines a request could not reach, for a timeout), matching in
// the exact index (merged with the predict-on-route side index) or the
// Decider's own approximate index (TTL, or an LRU model of each rank's
// cache at its advertised capacity whose leases the bookings hold; text
// prompts always match a TTL index), load projection from the bookings
// (routing/load) plus what engines report beyond them, session affinity
// over a Bindings store (hard or soft, bind after success or, on an
// Authoritative store, before dispatch), the pipeline, and the booking,
// which a Booking ends. MemBindings is the in-memory session store of one
// router.
//
// Disaggregated serving. Layout sorts a model's ranks by role and says
// how the model serves a request: whole on aggregated ranks, or in two
// hops, prefill then decode, once it has both prefill and decode ranks
// (with the decode fallback, whole on the decode ranks when no prefill
// rank is left). Disagg (decide_disagg.go) is the two-hop decision: a
// prefill stage and a decode stage, each a Decider configured as the
// reference router configures its prefill and decode routers
// (PrefillStage: no active blocks, no sessions; DecodeStage: no cache
// credit, no KV reuse, no prefill tokens), the decode rank chosen in the
// prefill rank's transfer domain, and session bindings pinning the
// decode rank only. The node and the simulator run it as they run a
// Decider.
//
// Refusals. The package does no I/O and reads no clock: the Decider takes
// the time from its caller and its injected clock, and reaches the
// outside only through the Bindings, LoadReporter and Observer it is
// given; a replicated Bindings may do I/O, which is why its methods take
// a context. The filters and selectors keep no per-request state. It does not
// implement required or preferred taints, data-parallel rank ranges other
// than the candidates given, the decode-worker cost variant of conditional
// disaggregation, or the multimodal embedding-cache bypass of the
// device-aware selector.
//
// Concurrency. Every selector and filter is safe for concurrent use:
// round-robin advances an atomic counter, and the selectors that draw random
// numbers (kv, kv-ttft, random, power-of-two) hold a mutex around their
// *rand.Rand, which they own; do not share one *rand.Rand between selectors
// or with other code. kv-ttft also holds a mutex over each decision that
// reads and updates its per-worker sums of recent prefill. A Decision is caller-owned scratch and must not be shared
// between concurrent calls. The Decider and MemBindings are safe for
// concurrent use; a Scratch belongs to one call, a Booking to its
// request's goroutine.
package policy
