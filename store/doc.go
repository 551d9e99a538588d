// Package store is the durable storage under the router's raft group: the
// raft log and stable store, and the FSM's tables, each on its own Pebble v2
// instance, plus the FSM's logical snapshot format.
//
// # Guarantees
//
// LogStore implements raft.LogStore and raft.StableStore. StoreLogs, Set,
// SetUint64 and DeleteRange commit with pebble.Sync, so what raft
// acknowledges survives a crash. A missing stable key yields an error whose
// text is exactly "not found" and a missing entry yields raft.ErrLogNotFound,
// the values raft compares against. FirstIndex and LastIndex are found by
// bounded iteration and tolerate gaps (the store is deliberately not a
// raft.MonotonicLogStore). DeleteRange treats min > max as a no-op and
// handles max == MaxUint64 without overflow. Returned values are copies.
//
// FSMStore holds eight tables (ownership, workers, cursors, sessions,
// engine block ids, remembered requests, runtime thresholds, worker-set
// incumbents) and a meta table. Writes go through a Batch that commits
// atomically with the applied raft index and term, without a WAL sync: the raft log replays
// them after a crash, and because the index shares the batch, the stored
// applied index never runs ahead of the data it covers. Sync and Snapshot
// sync the WAL so nothing raft may compact away is lost; Flush writes the
// memtables to sstables, so the next open replays no WAL (a graceful
// shutdown, and the restart benchmarks).
//
// Snapshots are logical (see snapformat.go): a checksummed header with the
// format version, applied index and term; typed, length-prefixed records;
// a trailer with per-table counts and an xxh3-64 checksum of the stream.
// Restore loads into a fresh generation directory, verifies everything,
// flushes, and only then swaps it in by renaming the LIVE file; on any
// error the live state is untouched and a malformed stream is ErrCorrupt.
// Snapshots are written in format version 4; restore also reads versions
// 1 to 3, which predate some tables (snapformat.go lists which).
//
// # Full disk and corruption
//
// Pebble ends in Logger.Fatalf when a WAL write fails, so a store keeps a
// free-space reserve (Options.MinFreeBytes, diskguard.go): below it
// StoreLogs and Batch.Commit write nothing and return ErrDiskFull (a
// refused Batch stays open, to be committed later at a higher index),
// while raft's term and vote, DeleteRange and Sync still write from the
// reserve. DiskFull reports the state of the last check. Corruption
// Pebble finds by checksum is reported to Options.Observer instead of
// Pebble's default Fatalf, and fails the reads that meet it with an error
// pebble.IsCorruptionError recognises.
//
// # Key layout
//
// Every key starts with a one-byte table prefix, so each table is the range
// [p, p+1) and every iterator carries both bounds. Integers are big-endian
// so byte order is numeric order. Raft log instance:
//
//	'l' ‖ BE64 index                              → raft.Log (logcodec.go)
//	's' ‖ key                                     → stable value (uint64s as BE64)
//
// FSM instance (one directory per generation, named by <Dir>/LIVE):
//
//	'c' ‖ BE64 worker ‖ BE32 rank                 → BE64 last applied event id
//	'e' ‖ BE64 worker ‖ BE32 rank ‖ BE64 eng hash → BE64 seq hash
//	'i' ‖ worker set key (UTF-8)                  → opaque worker-set incumbent (incumbents.go)
//	'm' 'a'                                       → BE64 applied index ‖ BE64 term
//	'm' 'v'                                       → BE32 FSM format version
//	'o' ‖ BE64 worker ‖ BE32 rank ‖ BE64 seq hash → 1 byte TierMask
//	'q' ‖ request id (1..MaxRequestIDBytes)       → BE64 FIFO sequence
//	'r' ‖ BE64 FIFO sequence                      → Request record (requests.go)
//	's' ‖ session or group key (UTF-8)            → Session record (records.go)
//	't' ‖ model name (UTF-8)                      → opaque runtime busy thresholds (thresholds.go)
//	'w' ‖ BE64 worker                             → opaque engine card
//
// Ownership is keyed worker first, not block first: an engine's "all blocks
// cleared" event and a worker's removal become one range tombstone, and
// consecutive keys share a 13-byte prefix that Pebble's block compression
// removes. Block-to-engines lookups are served by the in-memory index that
// ScanOwners rebuilds on restart, never by this table. The engine block
// table ('e') uses the same layout for the same reasons.
//
// Remembered requests are a FIFO keyed by a caller-assigned, increasing
// sequence ('r'), so the oldest row is the first key and eviction is a
// point delete; 'q' maps a request id to its sequence for lookups. Both
// keys are written and deleted together in one batch. Snapshots stream
// only 'r' and restore rebuilds 'q' from it.
//
// # Refusals
//
// The store does not interpret commands, engine cards or session policy,
// does not read clocks (deadlines arrive as Unix nanoseconds), does not
// answer "which engines hold block h", and does not accept a batch whose
// applied index does not advance.
//
// # Concurrency
//
// LogStore and FSMStore are safe for concurrent use; Close waits for
// in-flight calls and later calls return ErrClosed. Batch commits are
// serialised and must be issued in index order (raft's FSM goroutine does
// this). A Batch belongs to one goroutine. Scan callbacks run under a
// shared lock and must not call Restore or Close. A Snapshot may be
// persisted while commits and a Restore proceed; it pins its Pebble
// instance until Release.
package store
