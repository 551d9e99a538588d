// Package routing holds kvrouter's pure decision core: the vocabulary shared by
// every routing component (workers, storage tiers, block hashes, KV events,
// overlaps, loads) and the block hashing contract.
//
// Subpackages build on it:
//   - routing/index: the exact prefix index fed by KV events, the approximate
//     (TTL and LRU) index and the predict-on-route side index;
//   - routing/load: active-sequence load tracking per worker;
//   - routing/policy: eligibility filters, the KV cost model and the other
//     selectors, and the Decider that composes index, load and policy into
//     the one decision path of the router node and the simulator.
//
// Guarantees. Everything under routing is deterministic: no package reads the
// wall clock, opens a socket or touches a disk. Time enters as explicit
// time.Time arguments and randomness as an injected *rand.Rand, so a trace
// replayed twice with the same seed makes the same decisions. Inputs are
// validated at the package boundary and bad input yields an error, never a
// panic.
//
// Hashing contract (see hash.go): tokens are u32, split into complete blocks
// of the KV block size (the partial tail is not hashed); the local block hash
// is XXH3-64 of the block's tokens as little-endian u32 with seed 1337, where a
// LoRA name and a cache salt fold into the seed; sequence hashes chain as
// seq[0] = local[0], seq[i] = XXH3-64(le64(seq[i-1]) ‖ le64(local[i]), 1337).
// Engines' own block ids are opaque (EngineHash) and never used as index keys.
//
// Concurrency: the types in this package are plain values. The hashing
// functions are safe for concurrent use and do not allocate when given a
// destination slice with enough capacity.
package routing
