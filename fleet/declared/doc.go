// Package declared brings engines that carry no kvrouter code into a DC's
// registry: any OpenAI-compatible server (a stock vLLM or SGLang server)
// declared by the operator, either as a static list (--engine entries) or
// by DNS discovery of a headless Service (A/AAAA or SRV records,
// re-resolved periodically).
//
// # What a declared engine is
//
// A Spec names one data-parallel rank of one engine: its HTTP base URL,
// its model, its KV block size and, optionally, its KV-event publisher,
// replay endpoint (with a bound on one replay request) and Prometheus
// page, and its role in disaggregated serving (role= or type=:
// aggregated, prefill or decode, the card's worker_type) with a prefill
// engine's bootstrap port and the engines' transfer domain. Specs that
// share a URL are the
// ranks of one engine. An engine's id is derived from its URL, so it is
// the same on every router node and across restarts of the router.
//
// # Liveness and load
//
// A Prober per engine polls the engine's own endpoints every
// Config.Interval: GET /health decides liveness, GET /v1/models names the
// model when the spec does not (and refuses an engine that does not serve
// the declared one), GET /server_info (or /get_server_info) gives, once,
// an SGLang engine's disaggregation mode and bootstrap port when the spec
// names no role (role.go), and the Prometheus page, parsed with expfmt, gives
// each rank's running and waiting requests and KV-cache usage (vLLM's
// vllm:* and SGLang's sglang:* families). A healthy poll registers the
// engine (a card) and reports its load (a heartbeat) to the Sink; a
// failed poll reports nothing, so the registry's liveness timeout removes
// the engine within a bounded time, and the next healthy poll brings it
// back. The engine's process start time, when its Prometheus page has
// one, is its incarnation: a restarted engine is a new incarnation, whose
// cache is gone.
//
// # Refusals
//
// An engine whose Prometheus page reports a KV block size other than the
// declared one is never registered: routing it would hash its prompts in
// blocks that do not line up with its cache. The mismatch, a model the
// engine does not serve, and an unreachable engine are counted in
// kvrouter_engine_probe_failures_total{reason} and logged once per change.
//
// # Concurrency
//
// A Manager owns every goroutine it starts (one per engine, one per DNS
// source) and stops them when Run's context ends; Run returns after they
// have all returned. The Sink is called from those goroutines and must be
// safe for concurrent use.
package declared
