// Package server runs simulated engines (package mocker) as a process: an
// OpenAI-compatible HTTP server backed by one simulated engine per
// data-parallel rank, publishing on the NATS event plane exactly what a
// real engine's publisher would, so that router nodes can be tested over
// real sockets.
//
// # What it does
//
// Each rank's engine is driven in real time by its own goroutine, which
// sleeps until the engine's next event time, advances it to the current
// wall-clock time and dispatches the result: output tokens to the waiting
// HTTP handlers, and the step's KV events as one KVEventBatch on
// kvr.<dc>.kv.<engine>.<rank> (ids contiguous; split only past the wire
// limits). mocker.Config.SpeedUp divides every iteration time inside the
// engine, so the driver feeds it plain wall-clock times: at SpeedUp 10 a
// request takes a tenth of its modelled time.
//
// On the event plane the server publishes its WorkerCard on
// kvr.<dc>.workers.<engine>.register at start and every CardInterval (a router that
// starts later learns it), a Heartbeat with every rank's load and last
// event id every HeartbeatInterval, and a Deregister on clean shutdown. It
// answers SnapshotRequests on kvr.<dc>.snapshot.<engine>.<rank> from the
// engine's Dump. With a NATS server that confines engines to their own
// subjects, the credentials the process connects with (kvrouter mocker
// --nats-nkey-seed, ...) are the engine's identity. The card checksum hashes the card's content without the
// incarnation; the incarnation is random per start.
//
// The HTTP API serves POST /v1/chat/completions and /v1/completions,
// streaming (server-sent events) or not, GET /v1/models, GET /health and
// GET /metrics.
// The prompt's token ids come from the "kvrouter": {"token_ids": [...]}
// extension field, or from a completion prompt given as an integer array
// (or an array of one); otherwise text becomes pseudo tokens of four UTF-8
// bytes each (TextTokens), chat messages serialised with role markers. The
// block-hash seed is routing.Seed of "kvrouter.lora" and "cache_salt". The
// output is exactly max_completion_tokens / max_tokens (capped by
// MaxOutputTokens, default DefaultMaxTokens) filler words, one stream
// chunk per token. The X-Dp-Rank header pins a rank; otherwise the rank
// with the fewest requests in flight takes the request.
//
// # vLLM wire
//
// With Config.Protocol ProtocolVLLM the server uses no NATS and looks to a
// router like a vLLM engine started with --kv-events-config: each rank
// binds a ZMQ PUB socket (KVEventsEndpoint, port plus the rank) that sends
// [topic, 8-byte big-endian sequence from 0, msgpack KVEventBatch] per
// engine step, in vLLM 0.12–0.2x's array layout, and a ROUTER socket
// (ReplayEndpoint) that answers ["", start] with every kept batch from
// start on and the end marker seq -1; ReplayBufferSteps batches are kept.
// Block hashes are opaque 32-byte digests (SHA-256 of the incarnation and
// the engine's block id), so a consumer must hash token_ids itself; each
// stored event carries its blocks' tokens (kept per request in flight),
// the LoRA name as lora_name and a cache salt as every block's
// extra_keys. GET /metrics serves vllm:num_requests_running,
// vllm:num_requests_waiting, vllm:gpu_cache_usage_perc and
// vllm:kv_cache_usage_perc per rank (label engine). There is no card,
// heartbeat or snapshot. DropBatches makes a rank number and keep its next
// batches without sending them, and ClosePublisher and OpenPublisher close
// and rebind a rank's sockets, so a subscriber sees a gap that a replay repairs;
// InterceptReplays delays or swallows replay requests, so a subscriber
// meets a slow or silent replay socket.
//
// # Disaggregated serving
//
// Config.Role (aggregated, prefill or decode) is the card's worker_type,
// and with a BootstrapPort a prefill engine also declares its SGLang
// bootstrap server in the card and serves it on that port. A request's
// hand-off fields say which hop it is (handoff.go): vLLM's
// kv_transfer_params (a prefill engine answers do_remote_decode with the
// remote engine, one block id per prompt block, host and port; a decode
// engine given them back receives the prompt's cache), or SGLang's
// bootstrap host, port and room (the decode hop waits in the prefill
// engine's bootstrap server until the room's prefill is done,
// bootstrap.go). The decode hop then pays the KV transfer time of the
// timing model (mocker.Request.RemotePrefill). A hand-off the engine
// cannot use (malformed, a block count that does not match the prompt,
// the other role's hop) is refused with 400; a room whose prefill failed
// or never came within BootstrapTimeout, with 503. Both hops are the
// OpenAI request otherwise, and a request without hand-off fields is
// served whole whatever the role.
//
// # Token pacing
//
// The engine reports first tokens and completions but not each request's
// tokens per iteration. A request that produced its first token is
// credited one token per completed iteration, which is exact while each
// engine step completes one iteration (the driver advances at every
// iteration end) and no long prefill chunk starves a decode; a preempted
// request pauses until readmitted. The count stays below the output length
// until the completion sets it exactly, so every stream carries exactly
// the generated tokens and ends at the modelled completion time.
//
// # Refusals
//
// A client that disconnects (or whose request context ends) cancels its
// request in the engine, as vLLM and SGLang abort it: the rank stops
// generating for it and frees its KV blocks. Batched prompts and n > 1 are refused with 400.
// Stop sequences, sampling parameters, logprobs and tools are accepted and
// ignored. When the server stops, requests in flight end with an error
// (503, or an error event in a stream); it does not drain them.
//
// # Test hooks
//
// DropBatches makes a rank drop its next event batches, so a subscriber
// sees an id gap that only a snapshot can repair; PauseHeartbeats
// simulates a hung engine.
//
// # Concurrency
//
// Handler may be used from any number of goroutines. Run or Serve may be
// called once; they own every goroutine they start (one driver per rank,
// the heartbeat and card tickers) and return only after stopping them.
// Each rank's engine is behind a mutex that also covers publishing its
// event batches and snapshot replies, so the NATS connection sees a rank's
// batches and replies in event-id order: every batch with ids up to a
// reply's last_event_id is published before the reply, every later one
// after it. The NATS connection belongs to the caller, who closes it after
// Run returns.
package server
