// Package extproc is the router node's endpoint picker for gateways
// (Envoy, Istio, kgateway, GKE Gateway) that follow the Gateway API
// Inference Extension: Envoy's external processing (ext_proc) gRPC
// service, answering as the extension's endpoint-picker protocol says.
//
// Per request stream: the request headers (the path, the session and pin
// headers, the priority and policy-class headers), then the body, whole
// (BUFFERED) or in chunks (STREAMED, FULL_DUPLEX_STREAMED), buffered up to
// Config.MaxBodyBytes; the body is parsed as an OpenAI request by the
// frontend's request builder and routed by the node's dispatcher
// (Dispatcher.Route), the same decision, session bindings and load
// booking as a proxied request. The answer sets the
// x-gateway-destination-endpoint header (the engine's host:port) and the
// same value under the envoy.lb namespace of the dynamic metadata, and
// clears the route cache. The request's load stays booked until the
// response ends (its trailers, or its last body chunk, or its headers
// when it has no body), or the stream ends; its first response body chunk
// ends the prefill load and binds a new session, as the first token of a
// proxied request does.
//
// Body modes. Envoy 1.33 and later say their body modes in each stream's
// first message (protocol_config). In FULL_DUPLEX_STREAMED, and in
// STREAMED when Envoy sends the body without waiting for the headers'
// answer, the headers are answered once the body is in, with the
// destination; the body chunks are then answered in order (FULL_DUPLEX:
// sent back as streamed body mutations, since Envoy forwards only what
// the processor returns). Otherwise (BUFFERED, STREAMED that waits, or a
// mode not said) the headers are answered at once and the destination
// goes in the answer to the body's last chunk, which Envoy applies before
// it forwards the headers in BUFFERED mode only: configure BUFFERED or
// FULL_DUPLEX_STREAMED (docs/selection.md).
//
// Errors. A refusal of the request (bad body, unknown model, prompt too
// long, no engine, overload) is an ImmediateResponse with the status and
// OpenAI error body of the node's error table (the frontend's rows); an
// oversized body is 413; a path that is not an inference endpoint is 404.
// With Config.FailOpen, failures that are not the client's fault nor an
// overload (no engine, the deadline, a store failure, a node not ready)
// are answered without a destination instead, so that the gateway's own
// balancing applies. A stream that breaks the protocol (a message out of
// order, a response before the request ended) ends with
// INVALID_ARGUMENT. Whether the gateway fails open or closed when the
// picker is unreachable is its own setting (failure_mode_allow).
//
// Deadline. The picker's own work on a request, from the end of its body
// to the answer (parsing, tokenizing, the decision, a session bind
// through Raft, a wait in the admission queue), is bounded by
// Config.Deadline; past it the request is answered 504 (or falls
// through under FailOpen). The body itself must arrive within
// Config.BodyTimeout of the headers, the frontend's slowloris bound.
//
// Disaggregated serving. A Decision with a prefill hop is answered with
// the decode engine as the destination and the prefill engine's host:port
// in the x-prefiller-host-port request header, for the decode engine's
// sidecar (llm-d's), which runs the prefill hop; a client's header of
// that name is overwritten, or removed on other answers. The prefill
// hop's booking ends at the response's first body chunk.
//
// Subset hint. The extension's subset hint (the list under
// x-gateway-destination-endpoint-subset in the envoy.lb.subset_hint
// namespace of a request message's filter metadata) becomes the
// request's dispatch.Request.Subset: the decision chooses only among the
// engines whose endpoint it lists. A request it leaves without an engine
// (an empty list, or none of its endpoints usable) is answered 503, also
// under FailOpen, as the protocol requires.
//
// Refusals. The picker returns one endpoint, no fallbacks; it does not
// rewrite bodies.
//
// Concurrency. A Server is safe for concurrent use; each stream is served
// on gRPC's goroutine for it and starts none. Health answers the gRPC
// health protocol for "", "liveness", "readiness" and the ext_proc
// service.
package extproc
