// Package producer keeps one pool's summary for publication to other DCs:
// the exact, reference-counted block ownership of the pool's engine ranks,
// the filter in front of it (either cuckoo layout, or Bloom), dirty-bucket
// tracking, and the
// publication state (epoch, contiguous sequence numbers, subscriber feeds
// with bounded queues, heartbeats carrying pool load).
//
// A pool is the engines of one DC serving one model with one block size and
// one hashing scheme; PoolID names it as (dc, model, block size, hash
// scheme, hash seed).
//
// # Input
//
// The producer consumes ordered change batches through Source: block stored
// by a rank, block removed by a rank, rank cleared, worker removed, all in
// canonical sequence hashes. The intended feed is the DC's raft FSM change
// stream (one batch per applied log entry, Batch.Index = raft index), not a
// raft nonvoter of its own: the relay then needs no raft membership, and a
// batch boundary is a complete-command boundary, the only place where a
// publication may cut. Tests and benchmarks feed batches directly.
//
// A replacing batch (Batch.Replace) carries the pool's whole ownership
// after a source resync; the producer applies only its difference from
// what it holds (replace.go), so a resync to an unchanged pool publishes no
// delta and keeps seq where it was (BenchmarkResyncIdentical: 0 bytes
// against about 43 KB of bucket images for deleting and re-storing 32,768
// blocks).
//
// # Session summary
//
// A DC's session bindings are published as one more pool in the reserved
// SessionDomain (model "", block size 1, hash scheme "session-key-v1",
// seed kvrpb.SessionKeyHashSeed): entries are SessionHash of the binding
// keys, all held by SessionOwner, fed from Batch.Sessions through
// SessionBatch. It is an ordinary Producer, so the publication protocol
// and the consumers serve and mirror it like a block pool, and a lane
// query with a session's hash as a one-block prefix answers "probably
// bound there" (depth 1) or "not bound there" (depth 0). See session.go.
//
// # Guarantees
//
//   - Exact membership: each rank holds a block at most once; a block's
//     reference count is the number of ranks holding it, and it is one
//     filter entry while the count is non-zero. A removal of an unheld block
//     is a counted no-op; removing a rank or a worker releases each of its
//     blocks exactly once. The filter is only asked to delete what was
//     inserted, so deletes never remove another block's fingerprint.
//   - No false negatives are published: an insert that runs out of kicks is
//     recorded as omitted, and Apply then rebuilds into a filter twice as
//     large (a new epoch) before anything is published.
//   - Publication: each batch that changes at least one bucket (or Bloom
//     word) becomes one delta of absolute images with seq = previous + 1. A feed's
//     snapshot at (epoch, seq) plus its deltas in order reproduce the
//     producer's filter byte for byte (MarshalBinary).
//   - Bloom summaries: a removal changes no bit and publishes nothing; the
//     removed block stays claimed until the filter is rebuilt from the
//     exact set, after the batch that makes removed blocks reach
//     Config.BloomRebuildShare of its entries or its load pass GrowLoad
//     (bloom.go says why a share and not a period).
//   - Epochs: a fresh non-zero epoch is drawn at New, at every rebuild and
//     when a publication is too large to ship; each starts seq at 0 and
//     ends every feed (ErrProducerChanged or ErrResync). A restarted
//     producer draws a new epoch too, so a subscriber can never splice
//     deltas of two incarnations.
//   - Bounded queues: a feed whose queue is full when an update arrives is
//     ended with ErrLagged at once; the producer never blocks on a
//     subscriber and never drops an update silently.
//
// # Why absolute bucket images
//
// A delta carries the whole new word of each changed bucket rather than the
// insert and delete operations. Applying an image is idempotent and
// independent of the receiver's random eviction choices, the receiver needs
// no cuckoo logic, a bucket that changed many times in a batch ships once,
// and buckets that net-reverted ship not at all. The receiver ends with the
// producer's exact bytes, which is what the tests check.
//
// # What it refuses to do
//
// It does not delete from a Bloom summary (it rebuilds it), refuses
// a batch with an invalid change (a replacing batch holds Stored changes
// only) or a non-increasing index as a whole, and
// does no I/O and reads no clock: heartbeats happen when the owner calls
// Beat with its clock reading.
//
// # Concurrency
//
// Every method is safe for concurrent use; one mutex serialises them. A
// Feed is read by one goroutine; its Snapshot and Delta bytes are shared
// and read-only. Run is called by one goroutine, which owns the Source.
package producer
