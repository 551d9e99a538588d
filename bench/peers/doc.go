// Package peers measures kvrouter's exact prefix index beside the KV-block
// indexes of llm-d's KV-cache indexer (github.com/llm-d/llm-d-kv-cache), fed
// the same KV events and asked the same prefix queries.
//
// # What is compared
//
// Three subjects, each driven through its own public API:
//
//   - kvrouter: routing/index.Exact, fed routing.Event values with Apply and
//     queried with FindMatches (per worker, the prefix depth it holds).
//   - llmd-mem: kvblock.InMemoryIndex, llm-d's default backend, fed with
//     Index.Add and queried with Index.Lookup followed by the
//     LongestPrefixScorer, the two steps its Indexer.ScoreTokens runs after
//     hashing the request.
//   - llmd-cost: kvblock.CostAwareMemoryIndex (ristretto, default 2 GiB
//     budget) through the same two calls.
//
// The event stream is one fleet (Shape): workers in groups that share
// system-prompt blocks, each worker storing sequences of blocks of tokens
// drawn from a seeded generator. Every block of every event has token ids;
// each subject computes its keys from those tokens the way its API expects
// (kvrouter: routing.LocalHashes, chained into sequence hashes; llm-d: its
// TokenProcessor's CBOR+FNV-64a chain, TokensToKVBlockKeys). The engine's
// own block ids, which both APIs take alongside to resolve removals, are
// one shared set of opaque values. Queries are sequences drawn from the
// fleet with a seeded generator, so every query is a full hit for its owner
// and a system-prompt hit for the owner's group; each subject's answers are
// checked against that expectation, which is what makes the timings
// comparable.
//
// # Modes
//
// A measurement runs one subject in a fresh process, so that its heap is
// its own and nothing left by another subject (ristretto keeps a goroutine
// and its cache alive with no way to close it from outside the package)
// slows its garbage collector. The "keys" mode ingests events whose keys
// were computed beforehand and reports block events per second, heap per
// (worker, block) pair and query latency; the "tokens" mode times ingestion
// including each subject's hashing of the event's tokens. Run drives the
// processes interleaved (A, B, C, then A, B, C again) and reports ranges.
//
// # Concurrency
//
// A measurement is single-threaded: one goroutine ingests, then the same
// goroutine queries. Nothing here is safe for concurrent use.
package peers
