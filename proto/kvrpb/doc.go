// Package kvrpb holds the generated Go types of kvrouter's wire formats and
// the NATS subjects of the event plane. Regenerate with `make proto`; the
// generated files are committed.
//
//   - proto/kvr/v1/eventplane.proto: engine cards, heartbeats, KV event
//     batches and snapshots on NATS.
//   - proto/kvr/v1/raft.proto: the router cluster's raft commands, results,
//     snapshot records and the leader-forwarding gRPC service.
//   - proto/kvr/v1/admin.proto: the ClusterAdmin gRPC service (status,
//     join, leave) behind `kvrouter cluster`.
//   - proto/kvr/v1/ownership.proto: the Ownership gRPC service, each router
//     node's change stream of the DC's replicated block ownership and of
//     its bound sessions (as SessionKeyHash values), which the relay
//     follows.
//   - proto/kvr/v1/relay.proto: the relay's summary publication protocol
//     between DCs (subscribe, chunked snapshot, deltas, heartbeats).
//
// Subjects, all under the per-DC prefix kvr.<dc>:
//
//	kvr.<dc>.workers.<engine_id>.register    WorkerCard
//	kvr.<dc>.workers.<engine_id>.heartbeat   Heartbeat
//	kvr.<dc>.workers.<engine_id>.deregister  Deregister
//	kvr.<dc>.discover                        (empty) engines answer with their WorkerCard
//	kvr.<dc>.kv.<engine_id>.<rank>           KVEventBatch
//	kvr.<dc>.snapshot.<engine_id>.<rank>     SnapshotRequest -> SnapshotReply (request/reply)
//
// Every subject an engine publishes on carries its id, so that a NATS
// server can confine each engine's credentials to its own subjects
// (EnginePublish, EngineSubscribe), and a router refuses a payload whose
// engine id differs from its subject's (EngineOf).
//
// Decoders of these payloads sit at the edge and must reject malformed
// input with an error, never a panic (see routing/wire and its fuzz targets).
package kvrpb
