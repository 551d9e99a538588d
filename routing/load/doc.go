// Package load tracks the active load of every worker: the requests a router
// has dispatched and not yet seen finish. It is the router's "active
// sequences" (slot) tracker, and it projects, for a request that is being
// routed, what each candidate worker's load would become if it took that
// request. The projection feeds the cost model in routing/policy.
//
// Three quantities are kept per worker (routing.Worker, one data-parallel
// rank of one engine):
//   - active prefill tokens: the uncached prompt tokens of requests that have
//     not produced their first output token (ISL minus the device-cached
//     prefix, never below zero);
//   - active decode blocks: the KV blocks held by active requests. With
//     AssumeKVReuse, a prompt block named by the same routing.SeqHash and
//     held by several active requests of one worker counts once, because the
//     engine's prefix cache stores it once; a partial tail block and output
//     blocks are private to their request and always count. With
//     TrackOutputBlocks the output blocks are the expected output's from
//     Add (when the client gave an expected length) or those the reported
//     tokens filled, weighted by how far the request still is from its
//     expected length (Config.OutputDecay, output.go);
//   - active requests.
//
// Each is a toggle of Config (TrackPrefillTokens, TrackActiveBlocks,
// AssumeKVReuse), as in the reference router: a disaggregated decode
// stage tracks no prefill tokens and assumes no reuse, a prefill stage
// tracks no blocks.
//
// Guarantees. Loads never go negative and return to exactly zero once every
// request is freed; a worker with no active request holds no memory (the
// tracker keeps one emptied, bounded reference table to hand to the next
// worker that becomes active, so that a worker going idle between requests
// does not rebuild its table every time, and a bounded list of freed request
// records whose hash slices Add reuses). Free is idempotent, so a completion
// racing an expiry or a cancellation is harmless.
// Potential is exact when the hashes are chained sequence hashes from the
// first block of the prompt (routing.BlockHashes): then the blocks of a
// request that are already active on a worker form a prefix of its hashes,
// and the projection finds their count with a binary search over a per-worker
// reference table, in O(workers * log(blocks)) time and with no
// allocation beyond the caller's result slice.
//
// Cost. Add and Free touch every prompt block (a 12,288-token prompt at
// block size 64 is 192 increments and 192 decrements), so the per-worker
// reference counts live in a flat open-addressing table (refs.go) rather
// than a Go map: a few nanoseconds per block instead of tens, and no
// allocation per request once the tables and records are warm. Its probe
// positions are seeded per table, because sequence hashes are public
// functions of the prompt and a fixed placement would let a client choose
// colliding prompts.
//
// Refusals. The tracker does not read a clock: every time-dependent call
// takes now as an argument, and expiry happens only when Expire is called.
// It does not model prefill duration (no AIConfigurator-style backlog
// model), does not sample hashes with a stride, and does not decay the
// weight of a request's exclusive prompt blocks as the newest reference
// does (only its output blocks decay). It refuses duplicate request ids,
// negative sizes and a hash list longer than the prompt, with errors
// wrapping ErrInvalidRequest or ErrDuplicateRequest; it never panics on bad
// input. State is not persisted and not shared between router nodes.
//
// Concurrency. A Tracker is safe for concurrent use. Mutations take an
// exclusive lock; Potential, Active, Len and ExpiredTotal take a shared lock,
// so projections for concurrent requests run in parallel.
package load
