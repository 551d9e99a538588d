// Package kvrpb holds the generated Go types of kvrouter's event-plane wire
// formats (proto/kvr/v1/eventplane.proto) and the NATS subjects they travel
// on. Regenerate with `make proto`; the generated file is committed.
//
// Subjects, all under the per-DC prefix kvr.<dc>:
//
//	kvr.<dc>.workers.register              WorkerCard
//	kvr.<dc>.workers.heartbeat             Heartbeat
//	kvr.<dc>.workers.deregister            Deregister
//	kvr.<dc>.kv.<engine_id>.<rank>         KVEventBatch
//	kvr.<dc>.snapshot.<engine_id>.<rank>   SnapshotRequest -> SnapshotReply (request/reply)
//
// Decoders of these payloads sit at the edge and must reject malformed
// input with an error, never a panic (see routing/wire and its fuzz targets).
package kvrpb
