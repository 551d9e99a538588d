// Package gateway is a DC's OpenAI-compatible ingress: it serves
// POST /v1/chat/completions and /v1/completions, GET /v1/models (the union
// of the local router nodes' lists), GET /v1/sessions/{id}/home (for other
// DCs' gateways), /health, /ready and /metrics (its own Prometheus
// registry). For each completion it chooses the DC that should serve it,
// then proxies the request to a local router node or to that DC's gateway,
// and streams the answer back.
//
// # The decision
//
// The body is parsed by internal/oaiedge, the router node's parser, so
// the gateway refuses exactly the bodies a node would, before they cross
// the WAN; the session headers, the body limits, the OpenAI error body
// and the error table's type come from there too, so the two edges
// cannot drift apart. A request is parsed once and hashed once; one that
// another gateway forwarded is not parsed at all (that gateway did, and
// the node behind this one does). A request with token ids (kvrouter.token_ids, or a completions prompt of
// token ids) is hashed into block hashes with routing.BlockHashes, in the
// model's block size (Config.Pools) and the seed of its LoRA and cache
// salt. The exact local depth comes from a LocalIndex (RefsIndex over the
// local pools' producers), each remote DC's probable depth, staleness and
// load from a RemoteIndex (the relay's consumer). The policy computes, for
// the local DC and every eligible remote DC,
//
//	benefit(dc) = saved_prefill_tokens(dc) × PrefillCostPerTokenMs
//	            − wan_rtt_ms(dc) − load_penalty(dc)
//	saved_prefill_tokens(dc) = prefix_depth_blocks(dc) × block_size
//	load_penalty(dc) = PrefillTokens/Engines × PrefillCostPerTokenMs
//	                 + Utilization × UtilizationPenaltyMs
//
// with wan_rtt_ms(local) = 0, and picks the largest. The serving path
// does not ask for every remote depth: it hands the formula to
// RemoteIndex.Best as a consumer.Objective (the benefit is linear in depth
// with the same slope, block_size × PrefillCostPerTokenMs, in every DC)
// with the local benefit plus MinAdvantageMs as the minimum gain, and gets the
// winning lane, which probes a fraction of the filter positions a full
// query does. /v1/route/explain runs the full query and Policy.Choose,
// the same decision over every depth, so that operators see them all. A
// remote DC is
// eligible when its lane has a snapshot, is no staler than MaxStaleness,
// reports engines, is below MaxUtilization and has a configured Remote; it
// must beat the local benefit by more than MinAdvantageMs, so ties stay
// local. Policy.LocalOnly turns cross-DC prefix reuse off. A text prompt
// is hashed with its model's tokenizer (Config.Tokenizers, the same
// encoding the nodes use); a text prompt of a model without one has no
// block hashes and is served locally unless the load terms favour another
// DC.
//
// # Forwarding, fallback and relaying
//
// A forwarded request carries ForwardedHeader naming the forwarding DC. A
// gateway always serves such a request locally and never forwards it
// again, so a request crosses the WAN at most once; a client-sent value
// only forces local service. Local service goes to the router nodes
// round-robin over the healthy ones (health from polling /ready every
// HealthInterval); a node that refuses the connection is marked down and
// the next one is tried, since the request surely did not reach it. A
// request that reached a node is never sent to another. When the remote
// gateway fails before the first byte of its answer (no connection, or a
// 5xx status), the request is served locally and counted as a fallback;
// after the first byte there is no fallback, and an SSE answer that breaks
// ends with a `data: {"error":...}` event. Answers are relayed byte for
// byte with their status and end-to-end headers (X-Kvrouter-Worker among
// them) plus DCHeader naming the serving DC; every read of the upstream
// body is written and flushed at once, so streams are not delayed.
//
// # Sessions
//
// A request with a session header (oaiedge.SessionKeys.Read, the router
// node's headers and precedence; the binding key is oaiedge.Session.Key,
// the parent session when there is one) goes to the DC that
// owns the session, whatever the prefix policy says: affinity is a
// correctness property, the policy an optimisation.
//
//   - The rule. A session bound in one DC is served there. A session bound
//     nowhere is sent to its home: the first DC of a rendezvous ranking of
//     the federation's DC names (Homes), which every gateway computes
//     alike. A session bound in two DCs is served by the one Homes.Prefer
//     ranks first (its home if that is one of them); the other DC's gateway
//     drops its own binding (DELETE /v1/sessions/{id} on a local node) on
//     its next request for the session and forwards it.
//   - The race. When two gateways receive the first requests of a new
//     session concurrently, both find it bound nowhere and both send it to
//     its home, whose router cluster binds it once (the raft
//     compare-and-set: first writer wins, the loser runs on its own
//     engine in the same DC). So no session is served by two DCs, from
//     its first request on, without coordination between gateways.
//   - Why not the prefix policy for new sessions. Two gateways applying
//     the policy can choose two DCs, both bind, and both serve until each
//     has seen the other's binding (and every cached "not bound" answer
//     has expired); a tie-break can end that, but not prevent it. The
//     price of hashing is locality: with N DCs, (N−1)/N of new sessions
//     are served away from the gateway that first saw them, one WAN round
//     trip per request.
//   - Lookups. The local binding (GET /v1/sessions/{id} on a local node)
//     and the remote one (SessionLocator, when set) run in parallel;
//     without a locator the local lookup runs alone. Each DC's relay
//     publishes a session summary beside its block summaries: a cuckoo
//     filter of the hashes of the session keys its router cluster has
//     bound (producer.SessionDomain, fed from the cluster's Ownership.Watch
//     stream), which the other relays mirror in a lane like any pool's.
//     SummaryLocator queries each remote DC's session lane with the
//     session's hash as a one-block prefix: a DC whose lane is ready, no
//     staler than MaxStaleness and says absent is not asked; a DC whose
//     lane says probably present, or whose lane is missing, not ready or
//     stale, is asked by the authoritative lookup (Confirmer; HTTPLocator
//     asks the DC's home endpoint, GET /v1/sessions/{id}/home). Answers
//     that took a lookup are cached, positive for 2 s and negative for
//     1 s; a bound session thus costs one confirming WAN lookup per 2 s,
//     and a new one, once the lanes are fresh, none. Caching or trusting
//     "bound nowhere else" is safe because only the home binds a session
//     bound nowhere. A failed lookup counts as "not bound there".
//     kvrouter_gateway_session_lookups_total counts, per remote DC
//     considered, skipped, confirmed, false_positive, unsummarised and
//     failed lookups.
//   - Summaries and the rule. A summary only decides whom to ask; the
//     answer that places a request is a lookup or the home rule. "Present"
//     is always confirmed, so a filter false positive, or a binding that
//     has just ended, costs one lookup (false_positive) and nothing else.
//     "Absent" is trusted, and it can be wrong only for a binding newer
//     than the lane (the summary's change-to-visible time, well under
//     MaxStaleness while the lane is fresh). By the rule such a binding is
//     the home's, since only the home binds a session bound nowhere, and a
//     session believed bound nowhere goes to its home: the request lands
//     where the binding is, as with the negative cache. So summary
//     staleness costs lookups, never correctness, and the race of two
//     gateways on a new session is settled exactly as above: both find it
//     absent (in the summaries or by lookup), both send it to its home,
//     and the home's compare-and-set binds it once. The exceptions below
//     (a binding outside its home) are found as soon as the owner's
//     summary shows them, and until then by their old positive answers or
//     by the two-bindings rule.
//   - Exceptions, all settled by the two-bindings rule above. A session
//     can be bound outside its home only when the DC set changed (the old
//     binding is found and kept: the cache is there) or when
//     SessionFallback is on and its owner was unreachable. With
//     SessionFallback off (the default) a session whose owner fails before
//     answering gets a 503 session_unavailable rather than a second DC.
//
// # Guarantees
//
//   - Bad input gets a 4xx with an OpenAI error body naming the parameter
//     (malformed JSON, missing model or prompt, bad token ids, prompt over
//     Config.MaxPromptTokens, body over Config.MaxBodyBytes 413, slow body 408, oversized
//     session id); unknown routes 404, wrong methods 405; never a panic.
//   - Every answered completion is counted once in
//     kvrouter_gateway_requests_total by decision: local, remote,
//     forwarded_in, fallback or rejected (a client that leaves before an
//     answer is not counted).
//   - The body is forwarded unchanged; hop-by-hop headers are dropped in
//     both directions; redirects are not followed.
//
// # What it refuses to do
//
// It does not choose engines (the serving DC's router nodes do),
// rewrite bodies, retry a request a node accepted,
// or fall back once an answer has begun. It reads the clock only through
// Config.Now (deadlines, staleness, decision latency, cache expiry) and
// the health poll's ticker.
//
// # Concurrency
//
// A Gateway is safe for concurrent use: net/http serves each request on
// its own goroutine, the decision takes no gateway-wide lock (decision
// buffers come from a sync.Pool; node health is atomic), and LocalIndex,
// RemoteIndex and SessionLocator must be safe for concurrent use. Serve
// owns the HTTP server and the health-poll goroutine and returns after
// both stop; Run is the poll alone for callers with their own server.
// Forwarding a request starts no goroutine of its own, and the
// connections to the nodes stay open across requests (control answers
// are read to their end before they are closed). A session request's
// local lookup runs on one more goroutine when a SessionLocator is set,
// which the request waits for; HTTPLocator starts one goroutine per
// remote per lookup, and SummaryLocator one per DC it has to ask; both
// wait for all of them, each bounded by ControlTimeout.
//
// # Access
//
// Config.Edge guards the routes as a router node does (oaiedge.Access):
// client keys on the OpenAI routes, operator credentials on /metrics,
// /v1/route/explain and the home lookups (peers present their WAN
// certificate, or Edge.UpstreamToken), which answer on loopback
// listeners only when no operator credential is configured. The
// client's Authorization header travels with its request to the node
// and to a peer's gateway; the gateway's own calls to the nodes' session
// routes carry Edge.UpstreamToken.
//
// # Explain
//
// POST /v1/route/explain takes a completions body and answers, as JSON,
// what the prefix policy would do with it: the local depth and benefit,
// every remote lane's depth, readiness, staleness and eligibility, and the
// chosen DC. It serves and forwards nothing; operators use it to see why a
// request went where it did, and tests to wait for a summary to arrive
// without caching the prompt locally.
package gateway
