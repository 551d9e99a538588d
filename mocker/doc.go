// Package mocker simulates a vLLM-like inference engine rank as a library
// driven by a virtual clock: a paged KV cache with prefix caching and LRU
// eviction, continuous batching with chunked prefill, an iteration timing
// model, KV events with per-rank event ids, and load reports. The
// discrete-event simulator drives many engines through it; a process wrapper
// (HTTP + NATS) can drive one in real time by feeding it wall-clock times and
// a Config.SpeedUp.
//
// # Driving an engine
//
//	e, err := mocker.New(cfg, worker)
//	err = e.Submit(req, arrival)       // queue; validated, never panics
//	t, ok := e.NextEventTime()         // end of the iteration in flight, or
//	                                   // when an idle engine can start one
//	res := e.Advance(t)                // complete iterations ending <= t and
//	                                   // start the next ones
//
// Advance returns admissions (with the cached prefix found, for hit ratios),
// preemptions, first tokens, completions (arrival, first token and finish
// times, token counts, maximum inter-token gap; TTFT and mean ITL follow) and
// the KV events emitted, in order. A request submitted while an iteration is
// in flight joins at the next iteration boundary, as in a real engine. Load
// reports the engine's load at any time; Dump and EventsSince serve a
// consumer that detected an event gap.
//
// A prompt is given either as token ids, hashed with routing.LocalHashes and
// routing.SeqHashes, or as precomputed local hashes plus a token count, so
// that a simulator need not materialise 190k-token prompts.
//
// # KV cache
//
// The cache has NumBlocks blocks of BlockSize tokens. A request holds
// ceil(tokens in its KV / BlockSize) blocks: its complete prompt blocks are
// cached blocks named by their router sequence hash and shared by reference
// count; its partial prompt tail and its output tokens occupy anonymous blocks
// that are never cached or published (only prompt blocks are cached, the
// simplest choice that matches what routers can predict). A prompt block
// enters the cache, with a Stored event, at the end of the iteration that
// computed its last token. Two requests computing the same block in the same
// iteration share it: the second adopts the cached copy and frees its own.
// Admission looks up the longest cached prefix of the prompt, capped so that
// at least one token is always computed, and prefill skips it.
//
// When a block is needed the cache takes a free block, and only when none is
// left evicts the least recently released unreferenced cached block (a
// Removed event). It never evicts a referenced block. Requests release their
// blocks tail first, so a sequence's deepest blocks are evicted before its
// parents and the cached set is always prefix-closed. (vLLM's single free
// queue may evict a cached block while never-used blocks remain; this cache
// prefers never-used blocks, which only changes which block is reused.)
//
// When a running request cannot get the blocks for its next chunk or token,
// the engine preempts the most recently admitted running request, as vLLM's
// recompute preemption: all its blocks are released (its cached prompt
// blocks stay cached, unreferenced), it goes back to the front of the waiting
// queue and is recomputed on readmission (prompt and generated tokens, minus
// the cached prefix found again). Requests that could never fit the cache
// alone are refused by Submit with ErrTooLong, so progress is guaranteed.
//
// # KV events
//
// Events carry the engine's worker and the device tier; ids start at 1 per
// engine and increase by one. A Stored event lists a contiguous run of newly
// cached blocks of one request, each with its engine id (EngineHash, a
// bijective mix of the sequence hash, so it differs from the router's hash as
// a real engine's does) and its router local hash; Parent is the engine id of
// the block before the run unless the run starts the sequence. Removed lists
// evicted blocks; Cleared follows ResetCache. Replaying the events into an
// empty model reproduces the cache contents exactly. The last
// Config.EventRingSize events are kept for EventsSince; Dump gives the whole
// cache as synthetic Stored events plus the last event id.
//
// # Scheduling
//
// Each iteration schedules, as vLLM's v1 scheduler: first the running
// requests in admission order, each taking one decode token or its next
// prefill chunk out of the MaxNumBatchedTokens budget (chunked prefill: a long
// prompt is prefilled over several iterations); then, if nothing was
// preempted, waiting requests in FCFS order while the budget, MaxNumSeqs and
// the cache allow. The queue stops at the first request that does not fit.
// A request finishes after exactly MaxTokens output tokens.
//
// # Timing model
//
// One iteration takes
//
//	IterationOverhead + max(WeightRead, tokens × TokenNanos)
//	  + prefill attention pairs × AttentionPairNanos
//	  + decode context tokens × KVReadNanos
//
// divided by SpeedUp, where tokens counts prefill tokens plus one per decode
// and a prefill chunk of n tokens after c context tokens has n·c + n(n+1)/2
// attention pairs. Every term grows with the batch, so more work is never
// faster. The defaults model Llama-3.1-8B-Instruct in bf16 on one H100-80GB
// SXM under vLLM, from public rough figures:
//
//   - Dense compute: about 2 × 8e9 = 1.6e10 FLOPs per token. At 989 TFLOP/s
//     peak bf16 and ~45% MFU (445 TFLOP/s) that is 36 µs per token, about
//     28k prefill tokens/s at short context (TokenNanos = 36000).
//   - Attention: QKᵀ and AV cost 4 × d_model = 4 × 4096 FLOPs per layer per
//     (query, key) pair, × 32 layers = 5.2e5 FLOPs per pair, at the same
//     445 TFLOP/s: 1.2 ns per pair (AttentionPairNanos). A 16k-token prompt
//     then prefills in about 0.59 s dense + 0.16 s attention; at 128k context
//     attention dominates, as measured in practice.
//   - Weights: 16 GB streamed at ~2.7 TB/s (80% of 3.35 TB/s HBM3) is about
//     6 ms, the floor of a memory-bound decode step (WeightRead); with a
//     1.5 ms per-step overhead (IterationOverhead) a small decode batch takes
//     ~7.5 ms, in the observed 6–8 ms range.
//   - KV reads: 32 layers × 8 KV heads × 128 dims × 2 (K, V) × 2 bytes =
//     128 KiB per token, at 2.7 TB/s 48 ns per context token per decode
//     (KVReadNanos): 64 decodes at 16k context add ~50 ms.
//   - Capacity: of 80 GB, ~16 GB of weights and a few GB of activations and
//     CUDA graphs leave ~60 GB for KV, 60e9 / 131072 = 457,763 tokens, or 7,152
//     blocks of 64 tokens (NumBlocks).
//
// MaxNumBatchedTokens defaults to 8192 and MaxNumSeqs to 256 (vLLM's
// defaults on this GPU class).
//
// # Disaggregated serving
//
// An engine plays either role of disaggregated serving. As a prefill
// engine it serves requests of one output token (max_tokens 1), as any
// request; the prompt's blocks stay cached. As a decode engine it serves
// requests submitted with RemotePrefill, whose cache comes from a prefill
// engine: each waits Timing.TransferTime of its transferred tokens
// (KVTransferLatency, 1 ms, plus KVTransferNanos, 3.3 µs per token: 128
// KiB of KV per token over a 400 Gb/s RDMA link), then computes only its
// prompt's last partial block before decoding (transfer.go). The
// defaults model a NIXL transfer between two H100s on one fabric.
//
// # Guarantees
//
// Everything is deterministic: the same configuration and the same calls
// with the same times give the same results and the same events. No wall
// clock is read, no goroutine is started, no I/O is done. Inputs are
// validated at the boundary (Config.Validate, Submit) and bad input yields a
// wrapped sentinel error (ErrConfig, ErrBadRequest, ErrTooLong,
// ErrDuplicateID, ErrTimeBackwards, ErrBusy, ErrEventsGone), never a panic.
// The hot path works per block and per scheduled request, never per token.
//
// Cancel aborts a request as an engine does when its client goes away: a
// waiting one leaves the queue, a running one stops at the end of the
// iteration in flight; its blocks are released and it never finishes.
//
// # Refusals
//
// The engine does not hold a prefill's blocks for the decode engine that
// reads them (they are released when the one-token request finishes, and
// stay cached), reserve a transfer's blocks before its cache arrives, or
// keep a received cache across a preemption.
// The engine does not model host or disk offload tiers, speculative decoding,
// output-block caching, stop sequences (every request generates
// exactly MaxTokens tokens), or a sliding-window or multi-modal cache. It
// does not deduplicate hashing work across requests: each Submit hashes or
// verifies its own prompt.
//
// # Concurrency
//
// An Engine is not safe for concurrent use; one goroutine drives it (a
// process wrapper serialises access with its own mutex). Engines share no
// state, so distinct engines may be driven from distinct goroutines.
// Returned events are shared with the engine's ring and must not be
// modified.
package mocker
