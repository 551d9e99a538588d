// Package frontend is the router node's OpenAI-compatible HTTP edge: it
// parses just enough of each request to route it, asks a dispatch.Router
// for an engine, and reverse-proxies the original request to that engine,
// relaying streamed (SSE) and non-streamed answers.
//
// Endpoints. POST /v1/chat/completions and POST /v1/completions (streaming
// and not) are routed and proxied; GET /v1/models lists Router.Models() in
// the OpenAI list shape; DELETE /v1/sessions/{id} ends a session binding
// (Router.Unbind) and GET /v1/sessions/{id} tells where it is bound (this
// node's applied state; 404 session_not_found when unbound); GET /health is liveness, GET /ready readiness
// (Config.Ready, and false while draining); GET /metrics serves the node's
// Prometheus registry. GET and POST /busy_threshold read and replace a
// model's busy thresholds behind the operator token (busy_threshold.go).
//
// Admission inputs. The x-dynamo-meta-policy-class header and the body's
// "nvext" object (nvext.go parses it, nvext_request.go applies it; the
// request's one parse finds it, and it is decoded only when the body
// has one) go to the router:
// agent_hints.priority and strict_priority order the admission queue
// (the x-dynamo-request-priority and x-dynamo-request-strict-priority
// headers fill them when the body does not), osl is the expected output
// length the load tracker books, overlap_score_credit replaces the cost
// model's device credit for the request, session_control opens (binds on
// dispatch) or closes (ends after the request) a session, and
// backend_instance_id or decode_worker_id (with dp_rank) name the engine
// for the direct mode, as the pin headers do, and prefill_worker_id (with
// prefill_dp_rank) a disaggregated request's prefill engine, as the
// prefill pin headers (x-dynamo-prefill-instance-id,
// x-dynamo-prefill-dp-rank) do. A value out of range, or a
// session or engine contradicting the headers', is a 400 naming the
// field. Every overload answer carries Retry-After, and a policy-class
// refusal the structured body of overload.go.
//
// What is parsed. The body is read once, under Config.MaxBodyBytes, and
// scanned by a validating JSON reader that decodes only: model, stream,
// stream_options.include_usage, max_tokens and max_completion_tokens (the
// latter wins), cache_salt (vLLM's prefix-cache isolation salt, folded into
// the hash seed), and the extension object "kvrouter": {"token_ids": [...],
// "lora": "..."}, whose token ids are the prompt's tokens for routing and
// whose lora names the adapter for the hash seed. For completions the
// prompt may be a string, an array of strings, an array of token ids, or an
// array of token id arrays; a batch is routed on its first prompt. For chat
// the messages' roles and text content are serialised ("role\ncontent\n"
// per message, text parts concatenated) for text-hash routing unless
// kvrouter.token_ids is given. Every other field is validated as JSON and
// left alone. The parser (internal/oaiedge, shared with the DC gateway)
// accepts exactly the documents encoding/json accepts (checked by its fuzz
// targets).
//
// What is forwarded. The original body, byte for byte: the router owns no
// field of an aggregated request, so nothing is added or stripped (engines
// read kvrouter.token_ids themselves). A disaggregated decision
// (Decision.Prefill set) is served in two hops (handoff.go), whose bodies
// the router rewrites at their top level and owns the hand-off fields of,
// over anything the client sent in them:
//   - vLLM (a prefill engine without a bootstrap port): the prefill hop is
//     the request with max_tokens 1 (max_completion_tokens too when
//     given), stream false, no stream_options, min_tokens or
//     min_completion_tokens, and kv_transfer_params {"do_remote_decode":
//     true, ...}; its answer's kv_transfer_params go unchanged to the
//     decode hop, which is the client's request otherwise, and streams to
//     the client. The hops run one after the other.
//   - SGLang (a prefill engine that declares its bootstrap port): both hops
//     are the request with bootstrap_host (the prefill engine's host),
//     bootstrap_port and bootstrap_room (random, below 2^63, naming the
//     prefill rank modulo its data-parallel size); the prefill hop is not
//     streamed. The hops run at once, since the decode engine fetches the
//     cache through the bootstrap server, but nothing of the decode answer
//     reaches the client before the prefill hop succeeded.
//
// The prefill hop's answer is never the client's. One that fails in
// transport, with a 5xx or without a hand-off is reported unreachable
// (the dispatcher leaves its engine out) and the request is routed once
// more, to another pair and never whole (Request.PrefillFailed); a second
// failure is a 502, with nothing streamed. A prefill 4xx is the client's
// error, relayed; a decode engine that refuses the hand-off as invalid
// (400, 422) is a 502 naming it. X-Kvrouter-Prefill-Worker names the
// prefill rank beside X-Kvrouter-Worker's decode rank. Upstream headers are Content-Type,
// Accept, X-Request-Id (the client's, or a generated one, echoed in the
// response), the trace context, and Authorization: Bearer with
// Config.EngineAPIKey when one is set; the client's credentials are not
// forwarded. An engine answering 401 or 403 refused the router's key, a
// deployment fault, so the client gets 502 rather than the engine's
// status.
//
// Errors. Every error answered to a client is in the OpenAI shape
// {"error":{"message","type","param","code"}}, with its status from one
// table (errors.go: the dispatch sentinels' rows and the frontend's, on
// top of internal/oaiedge's rows for its own refusals): invalid body or headers 400 naming the parameter,
// prompt over the limit 400, unknown model 404, oversized body 413, slow
// body 408, overloaded 529 (Config.OverloadStatus), no engine 503, session
// limit 429, engine unreachable 502. Engine error statuses are passed on
// with their bodies normalised to the OpenAI shape. A stream that fails
// after it began ends with a `data: {"error":...}` event.
//
// Edge limits are named constants with their reasons in limits.go, and the
// slowloris defences are explained where they are set (Server.httpServer,
// oaiedge.BodyReader, exchange.relayStream). The session headers are read
// by oaiedge.SessionKeys.Read, as the DC gateway reads them, so that the
// gateway homes a session by the key this node binds it by.
//
// Engine transport. Engines are called through net/http's Transport
// (transport.go), tuned for a fleet: up to 256 idle connections per
// engine and no fleet-wide cap, idle connections closed after 4 s (just
// before uvicorn, which serves vLLM and SGLang, closes them after 5 s),
// dial and TLS handshake bounded by UpstreamDialTimeout, the response
// headers by UpstreamHeaderTimeout (a non-streaming engine sends them
// only when the completion is done), compression off so that SSE flows
// event by event, and no proxy unless Config.EngineProxy names one
// (HTTP_PROXY is for the operator's shell, not for engines inside the
// deployment). https engines get HTTP/2 when they offer it by ALPN.
// http:// engines get HTTP/1.1: net/http speaks cleartext HTTP/2 only by
// prior knowledge, with HTTP/1 off, which would break any engine that
// does not speak it, so it is opt-in (Config.EngineCleartextHTTP2).
//
// Guarantees. No input panics the server: bodies are validated at the
// edge. Decision.Done is called exactly once for every routed request,
// also on engine errors, client disconnects and stalled clients; a client
// that leaves cancels the engine request. The engine's progress reaches
// the decision as it happens: its first content chunk through
// Decision.OnFirstToken, every content chunk as one generated token
// through Decision.OnOutputTokens (an answer that does not stream reports
// its usage's count when it arrives), which the load tracker turns into
// decode load at block boundaries. Metrics (node/metrics) count
// requests by model, endpoint and outcome, with the model label set only
// for models the router accepted, and record TTFT, ITL and token counts;
// each request has one OpenTelemetry server span carrying the model,
// worker and cached blocks.
//
// Latency. The node's target is to add at most 150 µs at the median and
// 1 ms at p99 to a 12,288-token pre-tokenized completion at 1,000
// requests/s (node.BenchmarkNodeAddedLatency), and the request path is
// built for it:
//   - Bodies are read into pooled, reference-counted buffers (body.go).
//     Fresh 77 KB buffers were most of the node's garbage and ran the
//     collector dozens of times a second. The engine transport may read
//     and close a request body after RoundTrip returned, so each reader
//     holds its own reference and the buffer is recycled only after the
//     last one lets go; GetBody replays it on a fresh connection.
//   - Engine connections (engineConn) write a pooled body straight from
//     its buffer, without the 32 KiB copy buffer net/http would otherwise
//     allocate per request.
//   - Token id arrays are parsed by an AVX2 kernel where the processor has
//     one (internal/oaiedge): 64 bytes are classified at a time and eight
//     ids converted at once, about twice as fast as the portable
//     comma-mask loop, which stays the reference and the path elsewhere.
//     Parsing is still the largest part of the node's own work.
//   - Token id slices are pooled (oaiedge.ParsePooled) for the same reason as
//     bodies, and metric children are resolved once per model
//     (observers.go), not looked up by label values on every request.
//
// Unreachable engines. When the connection to the chosen engine cannot be
// made (refused, timed out), or the request's write fails on two kept-alive
// connections in turn (an engine that died leaves its connections in the
// pool), the engine has seen no whole request and the client nothing
// either, so the request is routed once more: Done reports
// dispatch.ErrEngineUnreachable, which makes the dispatcher leave that
// engine out, and a second Route chooses another. This moves a killed
// engine's traffic at once rather than after the liveness timeout. A
// second failure is answered with 502. An engine that hangs instead is
// dropped at the liveness timeout, which ends the Decision.Lost context
// of every request booked on it: the frontend then ends each of them, a
// stream with an error event and a request still waiting with 502, as it
// would if the engine had failed.
//
// Pass-through endpoints. POST /v1/embeddings (routed by the prefix of
// its first input, like a completions prompt), /v1/responses (its input
// items and instructions serialised like chat messages), /tokenize and
// /detokenize (routed by model alone) go through the same exchange as the
// completions; GET /v1/models/{id} answers from the router's models.
//
// Access. With Config.Edge's client keys, the OpenAI routes need one as
// "Authorization: Bearer"; the admin routes (the session routes,
// /v1/route/explain, /metrics) need an operator token or an operator
// certificate, and with neither configured answer on loopback listeners
// only (oaiedge.Access). Refusals are 401/403 in the OpenAI shape,
// counted in kvrouter_edge_auth_refusals_total; credentials are compared
// by digest in constant time and never logged. ServeAdmin serves the
// admin routes on a listener of their own.
//
// Refusals. The frontend tokenizes text only to route it (the engine
// gets the body as the client sent it), does not retry on another
// engine once a request was sent (the body may have been consumed; a
// prefill hop, whose answer no client sees, is the exception), and does
// not rewrite the bodies of aggregated requests. A vLLM prefill hop that
// ends the request at once (its one token is an end of sequence, and the
// engine keeps no cache) is not answered from the prefill engine: the
// decode hop runs with null kv_transfer_params and computes the prompt
// itself, as with vLLM's own proxy.
//
// Concurrency. A Server is safe for concurrent use; each request is served
// on its own goroutine by net/http and calls the Router from it, and
// forwarding it to the engine starts no other: the engine's lost context
// is watched by a registration removed when the request ends, and a body's
// share of the budget is released by the handler, not by a callback on the
// request's context, which would run on a goroutine of its own. Serve owns
// the HTTP server's goroutines and the engine transport's idle connections
// and releases them before it returns.
package frontend
