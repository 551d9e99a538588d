// Package consensus is the raft layer of one DC's router cluster: command
// encoding, the replicated FSM, the one write path, leader forwarding,
// the leadership barrier, membership, KV-event batching and the
// replicated session store.
//
// # Commands
//
// A log entry is one type byte, one payload-version byte and a protobuf
// payload (proto/kvr/v1/raft.proto). The type's high bit (IgnoreIfUnknown)
// lets a node skip a command it does not know; without it an unknown type
// or version, or a payload that does not unmarshal, is a determinism bug
// and halts the FSM (FSM.Halted wraps ErrHalted; the node applies nothing
// more until restored from a healthy snapshot). Commands are dispatched by
// the table in command.go; numbers are never reused. A business outcome (a
// lost compare-and-set, a session limit) is the command's RaftResult code.
//
// # Guarantees
//
//   - Binds are compare-and-set, first writer wins. A binding's version is
//     the raft index of the bind that created it: unique, increasing, a
//     fencing token.
//   - Time is stamped into entries by the leader (Config.Now); every node
//     judges liveness and expiry by the stamped time, so all nodes apply
//     the same changes. The leader proposes expiries of bindings whose
//     deadline has passed (ExpireSessions), re-checked at apply time.
//   - Keep-alives are batched: Sessions counts local holders in memory and
//     writes one TouchSessions and one ReleaseSessions entry per node per
//     KeepAliveInterval, never one per request.
//   - Every command is validated before it is proposed (and again at
//     apply, where a failure is CodeInvalid), including every length the
//     store bounds (session DC, request ids, worker records), so a write
//     the store would refuse never reaches the log.
//   - KV events are coalesced by Batcher into RaftKVEvents entries. Add
//     takes one rank's events as the event plane decoded them, checks
//     their shape (wire.CheckRun) and encodes them once; an entry frames
//     those encodings as they are. The FSM admits each event with
//     index.CheckNext against the rank's one cursor, in its tables, then
//     applies it to the tables and to the in-memory routing/index.Exact
//     (ApplyAdmitted). An index outcome that differs from the tables' is
//     counted (Deps.Metrics, kvrouter_raft_index_errors_total), logged and
//     repaired by rebuilding the rank's index from the tables.
//     On the leader the Batcher keeps up to BatcherConfig.InFlight entries
//     proposed and unapplied: raft.Apply enqueues before it returns, so
//     entries proposed from one goroutine keep their order without
//     waiting for each other. A follower's batcher forwards one entry at
//     a time, since concurrent forwarded calls could reach the leader out
//     of order and a reordered rank batch is a gap.
//   - The FSM decodes KV-events entries straight into routing events
//     (kvdecode.go). It takes only the canonical encoding the leader
//     writes and leaves anything else to protobuf and wire.BatchEvents, so
//     both give the same result (FuzzDecodeKVEventsFast) and judge batches
//     with wire.CheckRun. It stays on measurement (docs/benchmarks.md,
//     BenchmarkKVEventsThroughRaft/steady, interleaved): without it the
//     path costs 1.39 times the CPU per event, as every node decodes every
//     entry, and 1.28 times the path before the batcher encoded once.
//   - Node.SetThresholds replaces a model's runtime busy thresholds
//     (RaftSetThresholds, command 20 with IgnoreIfUnknown); FSM.
//     RuntimeThresholds reads them without locking (thresholds.go).
//   - Node.SetIncumbent records a worker set's incumbent checksum, as the
//     leader decides it (RaftSetIncumbent, command 21 with
//     IgnoreIfUnknown); FSM.WorkerSetIncumbents reads the table without
//     locking (incumbents.go).
//   - Node.ReplaceRank replaces one rank's ownership, engine block ids
//     and cursor with an engine snapshot through RaftReplaceRank chunks
//     below half of MaxCommandBytes: the first drops the rank, every
//     chunk adds its stored events, the last sets the cursor; the index
//     is cleared with the first chunk and rebuilt from the rank's tables
//     with the last, so it holds a subset of them while a replacement is
//     in progress or abandoned. Node.RegisterWorker records an engine's
//     card and Node.RemoveWorker drops an engine's card, ownership,
//     engine block ids and cursors, both through raft.
//   - Followers learn that an entry committed from the leader's next
//     append; when a burst ends that is the idle append sent after 1-2
//     CommitTimeouts, so CommitTimeout defaults to 5 ms (not raft's 50
//     ms), keeping a KV event's lag to every node's index within its 50
//     ms budget.
//   - FSM.StateHash is an XXH3-64 of a canonical encoding of every table;
//     nodes of one build at the same applied index report the same hash.
//   - The write path (Node.Apply) is propose then wait: validate → stamp
//     → encode once → size check → raft.Apply with timeout on the leader,
//     encode → forward on a follower; then unwrap. A timeout or lost
//     leadership is ErrIndeterminate, never a failure: retry with the same request id (Node.ApplyRetry);
//     the FSM answers a remembered request id (RememberedRequests, FIFO)
//     with its first result.
//   - A follower forwards writes to the leader over gRPC (RaftForward),
//     marked with x-kvr-forwarded metadata; a marked call that reaches a
//     follower is refused (ErrForwardLoop), never forwarded twice. The
//     leader re-validates forwarded bytes, since a bad entry would halt
//     every node.
//   - A new leader serves binds only after a raft barrier; Node.Ready is
//     set after it and reset when leadership is lost (raft.LeaderCh).
//   - A leader loss costs its detection, the election and the barrier:
//     HeartbeatTimeout and ElectionTimeout default to 500 ms, half of
//     raft's LAN values (config.go says why), for a DC-local group. Writes
//     move to the new leader as soon as the node knows it
//     (leaderchange.go): a forward pending on a leader that stopped being
//     this node's is cancelled (indeterminate, so ApplyRetry resends it
//     with its request id) instead of running out its ApplyTimeout +
//     HeartbeatTimeout bound, ApplyRetry's backoff ends at a leader change,
//     and a new leader holds the writes that reach it before its barrier
//     (up to HeartbeatTimeout) instead of refusing them with ErrNotReady.
//
// # Membership and administration
//
// A cluster starts from static peers (every member may set Bootstrap; a
// node whose stores hold state skips it) or grows by Join. The
// ClusterAdmin gRPC service (RegisterAdmin, on the same server as the
// forwarding service) answers Status on every member and carries out Join
// and Leave on the leader; a follower relays them once, marked like a
// forwarded write. The forwarding service needs each member's API address,
// which raft's configuration does not hold: static peers know each other
// from their configuration, the leader learns a joiner's from its Join,
// and SyncPeerAPIs lets every member learn the rest from the others'
// Status answers, so any member can forward to a leader that joined late.
//
// CaughtUp is a node's readiness to serve: a leader once it passed its
// barrier, a follower once it knows a leader and has applied every entry
// that leader reported committed (raft's applied index, which counts
// configuration and no-op entries the FSM never sees). It is sticky, so a
// restarted node serves nothing until caught up but a running node does
// not flap with elections. LeaderEpoch counts the times the node became a
// ready leader; a leader that caches state derived from its own proposals
// (the node's KV-event cursors) drops it when the epoch changes.
//
// NewTLSTransport runs raft's NetworkTransport over TLS (mutual, when the
// server config requires client certificates); the forwarding and admin
// clients take their credentials from Config.DialOptions.
//
// # Ownership change stream
//
// The FSM records, per applied entry that changed ownership, one batch of
// changes (stored, removed, rank cleared, worker removed, in sequence
// hashes) in a bounded ring (OwnershipLog). RegisterOwnership serves it as
// the Ownership.Watch gRPC stream: the batches after a raft index, or a
// snapshot consistent with one applied index and the batches after it. A
// DC's relay follows it to summarise the DC's ownership for other DCs; see
// watch.go for why a change stream rather than a raft nonvoter. The same
// batches and snapshots carry the session bindings that start and end, as
// kvrpb.SessionKeyHash of their keys (watch_sessions.go), which the relay
// publishes as the DC's session summary.
//
// # Durable state
//
// StoreState keeps a MemState for reads and mirrors every write into a
// store.Batch; the FSM commits it with the index and term of the last
// entry of every Apply or ApplyBatch, so the store's applied index always
// covers exactly the data it holds. OpenStoreState loads the tables back
// and NewFSM rebuilds the exact index from them. A node with a durable
// state starts raft with NoSnapshotRestoreOnStart: raft resumes after the
// latest snapshot, the FSM skips entries at or below the store's applied
// index, and when the store is behind the latest snapshot (its log was
// compacted past it, or the store stopped after an error) the node
// restores that snapshot before raft starts. Restore keeps the FSM's own
// stream format: the restored tables are written into the store as one
// batch (deletes of the old rows, puts of the new) at the snapshot's
// index and term (the stream's header records the term of its last
// entry; for an older stream without it, raft's metadata supplies it when
// it names the same index, else 0), and a snapshot not newer than the
// store is refused.
// After a store error StoreState stops writing (logged once) and the
// in-memory tables carry on; the store keeps its last good index.
//
// # Full disk and corruption
//
// A node whose raft log or FSM store is below its free-space reserve
// (store.ErrDiskFull) refuses proposals with ErrDiskFull, reports itself
// not caught up, and a leader hands its role over (storage.go); it
// recovers on the first write that finds room. Snapshots are verified at
// start and when raft opens one: a corrupt one is reported, set aside as
// <id>.corrupt.tmp, and the node resumes from the newest intact one with
// its log, takes a fresh one while running, or refuses to start with
// ErrNeedsRebuild when its log does not reach back (snapshot_check.go).
// OpenDurableState sets a corrupt FSM store aside and opens a fresh one,
// rebuilt from snapshots, the log and the leader (store_open.go).
//
// # Rebuilding a corrupt member
//
// A corrupt raft log store (CheckLog: a block failing its checksum, an
// entry that does not decode, a hole, or a log ending below the applied
// index) is not repaired in place: the member's state is set aside
// (SetAside) and the member rejoins empty (Rejoiner, rebuild.go). The
// danger is the vote. The stable keys (current term, vote) live in the
// same store, so the empty member may grant a vote in a term in which it
// had already voted for another candidate, and two leaders could be
// elected in that term. Rejoiner.Forget prevents it: before the empty
// member's raft runs, the leader commits a configuration without it. A
// vote the member grants afterwards counts only for a candidate C whose
// latest configuration still lists it, so whose log lacks the removal
// entry (raft applies a configuration when it appends it). C needs a
// majority of that old configuration, and that majority shares a member
// Y with the majority of the new configuration that committed the removal
// (together they outnumber the new configuration). Y's log holds the
// removal entry; C's log, lacking it, cannot be as up to date as Y's (an
// entry of the removal's term or a later one would, by log matching and
// leader completeness, follow the removal in C's log), so Y refuses C its
// vote and C cannot win: the member's second vote decides nothing. The
// member then joins as a nonvoter, receives the leader's snapshot and
// log, and is promoted to voter only once it applied the leader's commit
// index (CaughtUp). A corrupt member never serves: it is not caught up
// until then.
//
// CheckLog cannot see everything. Pebble treats a WAL that stops being
// readable part-way as a crash's torn tail and drops the rest; when the
// dropped entries are all above the applied index the log looks whole,
// and the member restarts with a shorter log (and possibly an older
// vote): checksums cannot tell that damage from a torn write.
//
// # What it refuses to do
//
// It does not import node: Sessions has the method set of
// node/dispatch.Bindings and both use routing.Binding, so the node adapts
// it by mapping errors only. It does not read the wall clock outside Config.Now. It keeps
// no durable state of its own: State is an interface (MemState, or
// StoreState over store.FSMStore, passed in Deps), and raft's stores come
// from Deps.
// It does not decide KV-event gaps or resyncs (the FSM keeps the cursors
// the node's ingestion compares against).
//
// # Operations
//
// TransferLeadership hands a leader's role to another voter (a draining
// node calls it before Shutdown). WriteBackup writes a member's state in
// the snapshot format, and RestoreBackup, on the leader, verifies such a
// stream whole and replaces every member's state with it through
// raft.Restore, re-stamped past the log's last index (backup.go explains
// why); both are served by the ClusterBackup gRPC service
// (RegisterBackup), and ReadBackupFile/WriteBackupFile are the file
// format of `kvrouter cluster backup`.
//
// # Concurrency and shutdown
//
// Node, FSM, Sessions and Batcher are safe for concurrent use. Every
// goroutine has an owner: Node.Shutdown stops the leadership watcher and
// leader loop, then raft, then closes forwarding connections and a
// transport the node built; Sessions.Close stops its keep-alive loop;
// Batcher.Run ends with its context, once its outstanding entries
// resolved (applied, or failed by a leadership change or raft's
// shutdown). In one process hosting several nodes (tests), shut every
// raft down before closing the shared transports, or peers' connection
// handlers outlive them. Raft handles heartbeats on the transport's
// connection goroutines; once Shutdown returned none of them runs raft
// code (heartbeatGate), so the caller may close the log and stable stores.
package consensus
