// Package fleet is the engines of one DC as a router process sees them:
// the registry of live engines and the ingestion of their KV events into
// the exact prefix index, today over kvrouter's NATS protocol. The router
// node and the relay both use it; it imports only routing, proto and
// internal packages, never node or relay.
//
// # Registry
//
// Engines publish a WorkerCard on kvr.<dc>.workers.<id>.register, a
// Heartbeat on kvr.<dc>.workers.<id>.heartbeat every 500 ms (with each
// rank's load and last event id) and a Deregister on
// kvr.<dc>.workers.<id>.deregister when they stop cleanly. The rules:
//
//   - A card registers the engine, or refreshes its liveness when it is the
//     same card. A card with a new incarnation (or rank count) of a known
//     engine is a restart: its old state is reported to the OnRemove
//     listeners, its blocks and cursors are dropped from the index and each
//     rank is resynced from a snapshot, as for a new engine.
//   - A heartbeat is accepted only for a registered engine whose
//     incarnation and card checksum match; it refreshes liveness and the
//     ranks' reported loads. Other heartbeats are counted and ignored: the
//     plane never asks for cards, engines publish theirs at start, on any
//     change and again every few heartbeats (ten is the recommendation),
//     so a node that starts late, or missed a card, learns every engine
//     within that period. A card counts as a heartbeat.
//   - An engine seen neither by card nor by accepted heartbeat for
//     Config.LivenessTimeout (3 s by default, six heartbeat periods; see
//     DefaultLivenessTimeout) is removed by the sweeper, as is an engine
//     that deregisters with its current incarnation. Removal drops its
//     blocks from the index and calls the OnRemove listeners (and, for an
//     engine that went silent, the OnSilent listeners first). Silence
//     counts only while the node listens: when the sweeper's own ticks,
//     measured on the real clock, stop for more than half the liveness
//     timeout (the node was stopped or starved, and heard nothing either),
//     that gap is not held against the engines (Registry.Sweep).
//
// A card's worker_type is its ranks' role (routing.Role: aggregated,
// prefill or decode; empty is aggregated) and its bootstrap_port a
// prefill engine's KV bootstrap server; a card with any other worker_type
// is malformed and refused, so that a misspelt decode engine is never
// sent whole requests. The decision path, not the registry, decides what
// the roles mean.
//
// # Identity and admission
//
// Every subject an engine publishes on carries its id. A card, heartbeat,
// deregistration or KV batch whose payload names another engine than its
// subject is refused (ErrIdentity). Where the NATS server confines each
// engine's credentials to its own subjects (fleet/natsbus's users file,
// or the same permissions on an external server), the subject is the
// publisher's identity: no engine can register, refresh, deregister or
// feed the index as another, nor take over another's id with a new
// incarnation and URL.
//
// Engines the operator declares (static entries, DNS discovery) are
// authoritative: an engine's own card claiming a declared id or endpoint
// URL is refused (ErrDeclared), a declared card evicts an engine's own
// card that claimed them, and engines' own heartbeats and
// deregistrations never touch a declared engine. Static entries are
// reserved before their first probe (DeclaredSink.Reserve).
//
// Engines' own cards are bounded: a new engine beyond Config.MaxEngines
// is refused (ErrCapacity), and cards that add, restart or update an
// engine pass a token bucket (Config.RegistrationRate and
// RegistrationBurst; ErrRateLimited); a card that only refreshes liveness
// is never limited. Cards and deregistrations have a bounded backlog in
// the NATS client, beyond which a flood is dropped unread. Every refusal
// is counted by message and reason (kvrouter_fleet_messages_refused_total,
// Stats.Refused). Heartbeats have a subscription, a backlog and a
// goroutine of their own, and never wait for the applier, so a flood of
// cards cannot delay them: the real engines stay alive through it.
//
// # KV events
//
// Each rank publishes KVEventBatch messages on kvr.<dc>.kv.<engine>.<rank>
// with event ids from 1, increasing by one. The plane applies them to the
// index (index.Exact's ordering rules: duplicates are ignored, id 1 after
// higher ids is a restart that clears the rank) and repairs gaps:
//
//   - Gap: when Apply reports index.ErrGap (a batch starts above cursor+1)
//     or a heartbeat reports a last event id that the cursor has not
//     reached one heartbeat period later (a lost tail), the rank is
//     resynced: a SnapshotRequest goes to kvr.<dc>.snapshot.<engine>.<rank>,
//     live batches of the rank are buffered meanwhile (bounded by
//     Config.MaxBufferedEvents), the snapshot replaces the rank's state
//     atomically with its last_event_id as cursor, and the buffer drains,
//     skipping the ids the snapshot covers. There is exactly one resync in
//     flight per rank: further gaps of a resyncing rank only buffer.
//   - A snapshot request times out after Config.SnapshotTimeout and is
//     retried Config.SnapshotAttempts times in all with doubling backoff.
//     A resync that still fails keeps the rank's last good state, drops the
//     buffer and counts an error; the next gap or heartbeat retries.
//   - A new engine (and a restarted one) is resynced rank by rank at
//     registration, so a node that starts after the engines learns their
//     caches.
//   - Events of engines that are not registered with the batch's
//     incarnation are dropped and counted (status "unregistered"): the
//     snapshot taken when the card arrives covers them, so buffering them
//     would only cost memory.
//
// An Index that implements Gate (the raft-backed index of a router
// cluster, which only the leader writes) is fed only while it accepts:
// standing by, the plane counts KV events as "standby", keeps no stream
// state and requests no snapshots. Once it accepts, the index's cursors
// (replicated from the previous leader) are the baseline: the first batch
// of each rank, or its heartbeats one period apart, reveal what the new
// writer cannot account for, and the rank is resynced.
//
// In approximate mode (Config.NoKVEvents) the plane does not subscribe to
// KV events nor request snapshots; the registry works the same.
//
// # What it refuses to do
//
// The plane does not route, track the router's own load accounting or
// persist anything. It never trusts payloads: every message is decoded by
// routing/wire, malformed ones are counted and dropped, and no input
// panics. It does not check a snapshot's incarnation (the wire decoder
// does not return it); a snapshot answered by a restarted engine is
// replaced when its new card arrives.
//
// # Concurrency
//
// NATS callbacks run on the client's goroutines, one per subscription,
// each delivering its subscription's messages in order. The KV callback
// decodes and queues batches; one applier goroutine owned by the Plane
// takes them in that order and is the only writer of the index, so each
// rank's events are applied in publication order. Snapshot requests run on
// goroutines of their own and hand their answers back to the applier, as
// do registrations and removals, so index writes stay on that one path.
// Cards, heartbeats and deregistrations have one subscription each, so
// each kind is handled in arrival order on its own goroutine; the sweeper
// goroutine expires engines and counts the messages the subscriptions
// dropped unread. Every goroutine the plane starts is stopped and waited for by
// Close. The Registry is safe for concurrent use; its read methods return
// copies. OnRemove listeners run on the goroutine that removed the engine
// (the registration callback or the sweeper) and must not block. A removed
// engine leaves the registry first and the index a moment later (through
// the applier), so readers filter candidates by the registry.
//
// Time comes from Config.Now, so tests control liveness; only the sweep
// period and snapshot timeouts use real timers.
package fleet
