// Package dispatch is the router node's decision path: for each client
// request it chooses an engine rank by KV-cache overlap and load, books the
// request's load on it, and keeps sessions on their engine. Dispatcher
// implements Router (types.go), the contract with the HTTP frontend.
//
// The decisions themselves (candidates, suspects, matching, load
// projection, session affinity, selection, booking) are policy.Decider's,
// the one implementation that the simulator (sim) runs too. This package
// adds what touches the node: the engine registry, request validation and
// hashing, the session store's wiring, the Decision handed to the
// frontend, the lost-engine contexts and the metrics.
//
// # Route, step by step
//
//  1. Validate: a request id and a model are required; a prompt over
//     Config.MaxPromptTokens (text counts len/4) is ErrPromptTooLong; a
//     session id over 256 bytes is ErrSessionLimit.
//  2. Candidates: the live ranks serving the model (Engines.Workers). An
//     unknown model is ErrModelNotFound; a known one without a live rank
//     is ErrNoEngine. Ranks whose block size differs from the model's
//     (Config.BlockSize, else the first rank's card) are not candidates,
//     nor are the ranks of an engine that a request could not reach in
//     the last Config.SuspectTimeout (see Unreachable engines).
//  3. Hashing: token ids become chained block hashes at that block size
//     (routing.BlockHashes, seed routing.Seed(LoRA, CacheSalt)); a text
//     prompt becomes text-chunk hashes (routing.TextHashes, 256-byte
//     chunks, seed routing.TextSeed(model, LoRA, CacheSalt)).
//  4. Matching: token hashes go to the exact index, merged with the
//     predict-on-route side index when Config.PredictTTL is set; text
//     hashes, and every prompt in approximate mode, go to the dispatcher's
//     own approximate indexes, which learn from its decisions (by TTL, or
//     with Config.ApproxPolicy LRU an LRU model of each engine rank's
//     cache at its capacity, holding a request's blocks until Done). A
//     text overlap of n chunks counts as n*64 tokens of cached prefix.
//  5. Load: each candidate's potential load (the load tracker's
//     projection) and current load, plus what the engine reports beyond
//     the dispatcher's own bookings when the registry implements
//     LoadReporter.
//  6. Choice: a session binding, or the policy pipeline (allowed set, pin,
//     busy thresholds, selector). Pipeline failures map to ErrOverloaded
//     (all busy, or the pinned worker busy), ErrNoEngine (no compatible
//     worker) and ErrBadRequest (a pin to an unknown worker or rank).
//  7. Booking: load.Tracker.Add, and the decision recorded in the
//     approximate or side index. The Decision's OnFirstToken ends the
//     prefill load; OnOutputTokens counts generated tokens, which with
//     output-block tracking become decode load at each block boundary
//     (policy.Booking.OutputTokens); Done frees the load (on success and
//     on error alike) and ends the request's hold on its session binding.
//
// Overhead phases (hashing, matching, scheduling, total) and the predicted
// hit ratio go to the node's metrics, as do the per-rank load gauges.
//
// # Disaggregated serving
//
// Engines register with a role (routing.Role: aggregated, prefill or
// decode). A model whose live ranks have roles is served as
// policy.Layout.Serving says (disagg.go):
//
//   - with prefill and decode ranks, in two hops: the Decision's Worker is
//     the decode engine and its Prefill (PrefillHop) the prefill engine,
//     chosen by policy.Disagg: the prefill engine by cached prefix and
//     prefill load, then the decode engine by decode load in its transfer
//     domain, a session's binding pinning the decode engine only. Each hop
//     books its own load: PrefillHop.Done ends the prefill hop's (an
//     unreachable prefill engine becomes a suspect of the prefill stage),
//     Decision.Done the decode hop's and any prefill hop left unended.
//     The prefill engine's SGLang bootstrap port, when the Engines
//     implement Bootstrapper and it has one, says how to hand off;
//   - with decode ranks and no prefill rank left (none registered, or
//     every one unreachable), whole on the decode (and aggregated) ranks
//     with Config.DecodeFallback, else ErrNoEngine; a request whose
//     prefill hop already failed (Request.PrefillFailed) is never served
//     whole;
//   - without decode ranks, whole on the aggregated ranks; prefill ranks
//     never serve a whole request.
//
// # Endpoint subsets
//
// A Request's Subset (a gateway's subset hint: endpoints as host:port)
// becomes the decision's allowed set (policy.Query.Allowed), mapped
// through the registry: the engines of the model whose URL's host:port
// it lists (subset.go). The pipeline's allowed filter leaves the others
// out, so a subset naming no live engine, or empty, is ErrNoEngine; a pin
// outside it is ErrNoEngine too (the engine is unavailable, not
// unknown). A session bound to an engine outside the subset is served
// inside it and its binding moves there on success, as a soft miss
// moves it. Under disaggregated serving the subset restricts the decode
// engine (the one the gateway sends the request to) always, and the
// prefill engine only when it names one of the model's prefill engines:
// a subset naming none speaks of the gateway's destinations, and the
// prefill hop does not go through the gateway. In the admission queue a
// request with a subset waits in its subset's lane, ready only when one
// of its engines is free.
//
// A model served by role bypasses the admission queue: a request that
// finds every prefill or decode engine busy is refused with ErrOverloaded
// at once. A worker set's advertised selector does not apply to either
// stage.
//
// # Selection without booking
//
// Select (select.go) runs the same steps for a caller that sends the
// request to the engine itself (the node's selection API) and returns the
// choice with every candidate's overlap, load and cost; step 7 is
// replaced by policy.Decider.Settle: no load is booked, the decision is
// recorded in the approximate or side index, and the session is settled
// as a successful request's (a new session is bound). A caller that wants
// the load booked calls Route and ends its Decision itself. Select does
// not wait in the admission queue. For a model served by role it decides
// as Route does (selectByRole, select.go): a disaggregated Selection carries
// the prefill engine (Selection.Prefill) beside the decode engine, and
// both stages settle their choice.
//
// # Session affinity
//
// With Config.AffinityTTL set, a request carrying a session id sticks to
// its session's engine. The binding key is the session id, or the parent
// session id when one is given, so a session group (an agent and its
// subagents) shares one binding. Bindings are per session, not per model:
// a session that changes model finds its engine not serving the new model
// and rebinds.
//
//   - Binding: the first successfully dispatched request binds the session
//     to its engine, at its first token (OnFirstToken) or, when no token
//     is reported, at Done(nil); a request that fails before either binds
//     nothing. Concurrent first requests of a session may go to different
//     engines: the first Bind wins (compare-and-set), the others keep their
//     own engine for their own request.
//   - Hard mode: the bound engine takes the request whenever it is still a
//     live candidate, even when busy (exact dispatch). If it is gone, the
//     binding is invalidated and the request is selected afresh, once, and
//     binds the session on success.
//   - Soft mode: the bound engine takes the request unless it is over a
//     busy threshold (Config.Thresholds); then the pipeline selects among
//     the others and, on success, the binding moves to the new engine
//     (compare-and-set on the version, so an older request cannot undo a
//     newer move). Without thresholds soft mode behaves as hard mode.
//   - A pinned request (Pin) goes to its pin; it binds a new session but
//     never moves an existing binding.
//   - Lifetime: requests running on the bound engine hold the binding, so
//     it does not expire under them; the idle timer (AffinityTTL) restarts
//     when the last one ends. A failed request keeps the binding: an
//     engine that fails is removed by the registry (RemoveEngine), which
//     drops its bindings. SessionFinal unbinds the key when the request
//     ends; Unbind does it explicitly.
//   - Limits: at most Config.MaxSessions bindings (65,536 by default); a
//     new session beyond it is ErrSessionLimit. Ids are at most 256 bytes.
//
// The store is behind the Bindings interface (policy.Bindings):
// policy.MemBindings for one node, the DC's Raft-replicated store for a cluster.
//
// # Unreachable engines
//
// An engine killed without a goodbye stays in the registry until the
// event plane's liveness timeout, and the kv policy keeps choosing it for
// the prefixes it cached. The frontend reports a request that could not
// reach its engine (nothing was sent) with Done(ErrEngineUnreachable) and
// routes it once more; the dispatcher makes that engine a suspect, left
// out of the candidates for Config.SuspectTimeout (the node's liveness
// timeout), so the second Route and the requests after it go elsewhere
// without each paying a failed connection. A session bound to a suspect is
// treated as bound to an engine that left: invalidated and selected
// afresh. With every engine suspected, or a request pinned to a suspect,
// Route returns ErrNoEngine (not the bad-request error of a pin to an
// engine that does not exist). Suspicions are counted in
// kvrouter_router_engine_unreachable_total.
//
// An engine that hangs is reachable but answers nothing, so only the
// registry's liveness timeout notices it. EngineSilent, which the node
// calls for every engine the registry drops for silence (and not for one
// that deregistered, which drains its requests first), ends the
// Decision.Lost context of every request booked on it, and the frontend
// ends those requests.
//
// # Admission queue
//
// With Config.Queue.Policy set (off by default), requests that find every
// candidate busy under the model's thresholds and their policy class's
// wait in a per-model queue (routing/queue) instead of getting 529 at
// once; see queue.go for the turns, cancellation and max wait, and
// docs/queueing.md. SetThresholds changes a model's busy thresholds at
// run time.
//
// # Per-request and per-set inputs
//
// A Request's OutputTokens (the client's expected output length) books
// the output's blocks with output-block tracking on; its
// OverlapScoreCredit replaces the KV cost model's device credit for that
// request; its Pin is the direct mode's engine. When the Engines also
// implement Advertiser, a model's worker set's advertised router settings
// replace the configured selector and busy thresholds for that model
// (advertised.go); runtime thresholds still win.
//
// # Refusals
//
// The dispatcher does not proxy or retry requests (the frontend does
// both hops of a disaggregated one), and does not
// feed the exact index (the event plane does). It does not mix block sizes
// within a model, model engine-side prefill timing, or carry bindings
// across nodes (policy.MemBindings is local). Nothing here panics on bad input.
//
// # Concurrency
//
// Route, Select, Models, Unbind and RemoveEngine are safe for concurrent use and
// are called from many request goroutines. The Decider and the session
// store are themselves safe; the dispatcher's own state (the per-rank
// gauges) is behind one RWMutex that the hot path only read-locks, and
// per-call scratch comes from a sync.Pool. A Decision belongs to its request's goroutine (see Decision).
// No goroutine is started: expiry of lost requests runs inside Route, at
// most once per Config.ExpireInterval of the injected clock.
package dispatch
