// Package vllmevents ingests the native KV-cache events of vLLM and SGLang
// engines: the ZeroMQ publisher that vLLM's --kv-events-config starts (and
// SGLang's copy of it), with msgpack payloads and a replay socket for
// missed batches. It turns them into routing.Event values for the same
// sink the NATS event plane feeds, so nothing downstream knows which kind
// of engine sent them.
//
// # Wire
//
// The engine's PUB socket sends three-frame messages: the topic, the
// batch's sequence number as 8 bytes big-endian (a per-process counter
// from 0, so it restarts with the engine) and a msgpack KVEventBatch. A
// Subscriber connects a SUB socket to it and, on a gap, a DEALER socket to
// the engine's ROUTER replay endpoint: it sends ["", first missing
// sequence] and reads ["", seq, payload] frames until seq -1 with an empty
// payload.
//
// Every layout published from vLLM 0.9 to today, and SGLang's, decodes
// (DecodeBatch; testdata/ holds one fixture per layout):
//
//   - the batch as an array [ts, events] or [ts, events, dp_rank], or as a
//     map with the same field names;
//   - each event as a tagged array whose first element is the class name
//     ("BlockStored", "BlockRemoved", "AllBlocksCleared") with fields by
//     position, or as a map with the class name under "type";
//   - BlockStored's fourth field is block_size, or in the earliest layout
//     num_toks_per_block (one count per block); lora_id, medium, lora_name,
//     extra_keys, group_idx, kv_cache_spec_kind and later fields are
//     optional, and unknown trailing fields or map keys are skipped;
//   - block hashes are msgpack ints (signed Python hash() values or
//     unsigned 64-bit digests) or bytes.
//
// # Hashes
//
// Engine block hashes are opaque ids: the router's own block hashes are
// computed from each BlockStored's token_ids with routing.HashBlock, seeded
// with routing.Seed(lora_name, ""), and chained through the parent by the
// index, which keeps every worker's map from engine id to router hash (see
// routing.StoredBlock). An int hash is its 64-bit two's-complement value;
// a bytes hash is mapped to XXH3-64 of its bytes (seed 0), which is
// deterministic and spreads any digest length. Blocks whose per-block
// extra_keys carry more than the LoRA name (multimodal inputs, a cache
// salt) fold the raw msgpack of those keys into their seed: requests can
// never match them, which is the conservative outcome, since the router
// cannot reproduce what they hash. An event with only the deprecated
// lora_id uses the seed of the name "lora-id:<n>" for the same reason.
// Groups of hybrid models whose kv_cache_spec_kind is not full or MLA
// attention are skipped (sliding-window blocks cannot serve a prefix), and
// so are stored events without token ids (vLLM's CPU-offload placeholders,
// block_size 0), which the router cannot hash; both are counted in
// kvrouter_vllmevents_skipped_events_total{reason}. A block_size of 0 or
// null with token ids that fill the declared size is accepted.
//
// Media map to tiers: absent or "GPU" is the device tier, vLLM's "CPU"
// and SGLang's "CPU_TIER1" the host tier, vLLM's "STORAGE" and SGLang's
// "CPU_TIER2" the disk tier, and "EXTERNAL", "SHARED", "REMOTE" or
// "NETWORK" (the reference's external tier) the shared tier (TierOf).
//
// # Sequence
//
// A Subscriber numbers the events it emits itself, contiguously from the
// sink's cursor, and checks the engine's batch sequence: a batch that
// follows the previous one applies; a gap is counted and filled by a
// replay from the first missing batch; live batches that a replay already
// delivered are dropped as duplicates. After a reconnection it replays
// from the last batch applied: the same engine repeats that batch byte
// for byte, while a restarted one sends another batch under that number,
// or none.
//
// Whatever history it cannot follow batch by batch, the subscriber
// resyncs by one rule: it clears the worker (an AllBlocksCleared of its
// own), applies every batch the engine's replay buffer keeps, from its
// oldest, and goes on with live batches; each resync is counted in
// kvrouter_vllmevents_resyncs_total{reason} and logged with its reason.
// It resyncs at start (the engine's cache predates it); after an engine
// restart (a sequence that goes back, or a reconnection's replay that
// does not repeat the last batch); after a gap that the replay cannot
// fill (the buffer rolled over, no complete answer within ReplayTimeout,
// no replay endpoint); and when the sink refuses an event as out of step
// because its cursor moved under the subscriber (the engine expired and
// its blocks were dropped, a new raft leader holds another cursor): the
// batches in hand, replayed ones included, are then left to the resync
// instead of lost. A GatedSink (a raft cluster member, whose index takes
// events only while it leads) is also checked each time its gate opens:
// a cursor other than the subscriber's ids means batches were dropped at
// the gate, and the worker is resynced without waiting for the next one. vLLM offers no dump of its cache, so blocks whose
// batches have left the buffer cannot be learnt; the clear keeps the
// worker from claiming blocks that the lost batches removed. Without a
// replay endpoint, or while the replay fails, the worker is rebuilt from
// live batches, and a resync whose replay failed is tried again after a
// backoff (Retry, doubling up to five minutes), on a later batch or
// reconnection. kvrouter_vllmevents_replayed_batches_total{outcome} counts
// what replays delivered (applied, duplicate, dropped).
//
// # Bad input
//
// Malformed msgpack, unknown event tags, a block size other than the
// declared one, token counts that do not fill the blocks, unknown media, a
// wrong topic or rank and a sequence regression are each counted in
// kvrouter_vllmevents_rejected_total{reason} and logged; the batch (or the
// event alone, when the rest of the batch decodes) is dropped. Dropping a
// stored event only leaves the index short of blocks: later events that
// chain on it are refused by the index as having an unknown parent. The
// decoder never panics and never allocates more than its input justifies.
//
// # Why ZeroMQ in pure Go
//
// github.com/go-zeromq/zmq4 speaks ZMTP 3 with the NULL mechanism and
// works against libzmq without cgo, so the router stays a static binary;
// its SUB socket does not resend subscriptions after a reconnect, so the
// subscriber reconnects itself after IdleTimeout without a message and
// asks for a replay from the last batch applied each time.
//
// # Concurrency
//
// A Subscriber is one goroutine (Run) per engine rank endpoint; it calls
// the Sink from that goroutine only, so several subscribers share a sink
// that is safe for concurrent use (index.Exact is). DecodeBatch and the
// Converter are not safe for concurrent use; a Metrics value is.
package vllmevents
