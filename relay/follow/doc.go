// Package follow feeds a relay producer from its DC's replicated block
// ownership: a producer.Source over the Ownership.Watch gRPC stream that
// every router node serves from its raft FSM (consensus.OwnershipLog,
// proto/kvr/v1/ownership.proto).
//
// # Why a change stream and not a raft nonvoter
//
// The relay needs the DC's ownership as an ordered stream with
// complete-command boundaries. A raft nonvoter would give it that, at the
// price of making the relay a member of the router cluster: membership
// changes on every relay restart, raft snapshots shipped to it, a full FSM
// (sessions, engine block ids, an exact index) in the relay process, and a
// peer the leader replicates to on its hot path. The change stream costs
// each router node one bounded ring, keeps the relay out of raft's
// configuration and failure modes, and is served by any node, so the
// relay fails over between nodes with a reconnect. Each batch is one raft
// entry and carries its raft index, so resuming on another node is exact:
// nodes that applied the same entries recorded the same batches.
//
// # Guarantees
//
//   - Next returns batches in strictly increasing raft index order, one
//     per entry that changed ownership, never skipping one: every batch's
//     prev_index must be at or below the last index delivered, else the
//     stream is dropped and resumed (ErrGap is counted, never returned).
//   - Resume: after a broken stream, Source reconnects with backoff to the
//     next address and asks for the batches after the last index it
//     delivered. A node whose ring no longer covers that index answers
//     with a snapshot; so does a stream that ended with OUT_OF_RANGE (the
//     watcher fell out of the node's ring), which is resubscribed at once.
//   - A snapshot becomes one replacing Batch (producer.Batch.Replace),
//     indexed at the snapshot's applied index, holding a Stored change for
//     every snapshot row and the bound sessions in Batch.Sessions. The
//     producer applies only its difference from what it holds, so a resync
//     to an unchanged DC publishes nothing, and nothing in between is ever
//     published.
//   - Sessions: each batch's session lists (the keys the entry bound and
//     unbound, as kvrpb.SessionKeyHash) become Batch.Sessions, Removed and
//     Stored changes of producer.SessionOwner, for the DC's session
//     summary (producer.SessionBatch). An entry that changed only sessions
//     is a batch with no block changes.
//   - Snapshot chunks are collected whole before the batch is returned; a
//     stream that breaks mid-snapshot is resumed from the last delivered
//     index and the partial snapshot is dropped.
//
// # What it refuses to do
//
// It does not filter by pool (the stream carries the whole DC's
// ownership), does not read the wall clock (backoff uses timers, jitter
// comes from an injected *rand.Rand), and never returns a transport error
// from Next: only ctx's error, ErrClosed, or a configuration error ends it.
//
// # Concurrency
//
// A Source is used by one goroutine at a time (producer.Run's); Stats,
// Index and Close are safe to call from any goroutine. Close ends a
// blocked Next with ErrClosed and closes every connection.
package follow
