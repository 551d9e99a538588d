// Package publish is the relay publication protocol over gRPC
// (proto/kvr/v1/relay.proto, service kvr.v1.Relay): the server side that
// streams registered producers' summaries, the subscriber side that
// validates the stream, and the one table mapping protocol errors to gRPC
// status codes and client actions.
//
// # Stream
//
// Subscribe(pool) answers with a barrier snapshot of the pool's summary
// (a cuckoo or Bloom filter, relay/filter), tagged (epoch, seq) and split
// into chunks of at most ChunkBytes (default 1 MiB, under gRPC's default
// 4 MiB message limit); then deltas carrying absolute images of changed
// buckets (or Bloom words) with seq = previous + 1;
// then, interleaved, heartbeats with the pool's load and the producer's seq
// at the time they were queued. Every message repeats the contract marker
// "KVR1" and protocol version 1.
//
// # Guarantees
//
//   - Never silent divergence: the subscriber side (Stream) accepts a delta
//     only with the snapshot's epoch and the next seq, and a heartbeat only
//     at the applied seq. A gap (ErrGap), an epoch change
//     (ErrProducerChanged), a lag (ErrLagged), an oversized publication
//     (ErrResync) or a malformed message (ErrProtocol) ends the stream, and
//     the only way forward is a new subscription, which starts with a fresh
//     snapshot. Snapshot plus contiguous deltas reproduce the producer's
//     filter byte for byte.
//   - Bounded memory: each subscriber has the producer's bounded queue; a
//     slow one is cut with LAGGED (RESOURCE_EXHAUSTED), never buffered
//     without limit, never allowed to slow the producer or other
//     subscribers. A subscriber accepts a snapshot of at most
//     MaxSnapshotBytes and buffers only what it received.
//   - Typed errors: every stream ends with a status from errorTable and the
//     reason name in the "kvr-relay-reason" trailer; ActionFor gives the
//     client action: PRODUCER_CHANGED, RESYNC and GAP resubscribe at once;
//     LAGGED, UNAVAILABLE and PROTOCOL after backoff; UNKNOWN_POOL,
//     CONTRACT_MISMATCH and INVALID_REQUEST only at the slowest retry,
//     since they need a deployment change.
//   - Untrusted input: requests and messages are validated at the boundary;
//     the decoders never panic (FuzzReader, FuzzSubscribeRequest; the
//     filter payloads are fuzzed in relay/filter).
//
// # What it refuses to do
//
// Version 1 does not resume a stream from a seq (the request's last epoch
// and seq are informational): a reconnect costs one snapshot, which is the
// simple, always-correct path. It does not dial or listen (the owner builds the grpc.Server and ClientConn with
// ServerOptions and DialOptions, choosing TLS through credentials), and
// does not read the clock: the owner calls Beat or Run.
//
// # Concurrency
//
// Server is safe for concurrent use; each subscription runs in its gRPC
// handler goroutine and ends when the feed or the stream ends. Stream is
// used by one goroutine. A stalled connection is detected by keepalive
// (KeepaliveTime + KeepaliveTimeout) and its handler returns.
package publish
