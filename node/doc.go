// Package node assembles one router node of a DC: a NATS connection (to an
// embedded or external server), the event plane that learns engines and
// their KV caches from it, the decision path (exact or approximate index,
// load tracker, policy pipeline, session affinity) and the OpenAI-compatible
// HTTP frontend in front of them, plus metrics and optional OTLP tracing.
//
// Lifecycle: New validates the configuration and builds every component
// without starting anything; Run connects, starts the components, serves
// until its context ends, then stops them in reverse order and waits for
// every goroutine.
//
// # Alone or in a cluster
//
// Without Config.Cluster.RaftAddr the node is alone: it applies KV events
// to its own index and keeps session bindings in memory, and it is ready
// (GET /ready) once an engine is registered, or, with MinInitialEngines,
// once the fleet has first counted that many (gate.go; until then the
// routed endpoints answer 503).
//
// With it the node is a member of its DC's raft cluster (consensus), with
// the raft log, the replicated tables and snapshots in Pebble under
// Cluster.DataDir:
//
//   - KV events: every node runs the event plane for the engine registry
//     and loads, but only the ready leader ingests KV events
//     (raftIngest is the plane's index and an fleet.Gate). It checks
//     each event against its proposed cursor with index.CheckNext (the
//     rule the FSM and the index apply) and queues runs of the decoded
//     events in the consensus.Batcher, which encodes each run once; a snapshot resync becomes chunked ReplaceRank
//     entries after the queued events; an engine's removal is a raft entry.
//     Every node applies the entries to its FSM and to the exact index it
//     routes from. A new leader starts from the replicated cursors, so a
//     rank whose events it cannot account for is resynced. A declared
//     engine's KV events (fleet/vllmevents) are followed on every member
//     and ingested by the leader alone (gatedSink), a batch as one run; a
//     new leader's subscriber compares the replicated cursor with its own
//     and, when they differ, resyncs the engine from the engine's replay
//     buffer.
//   - Sessions: the dispatcher's session store is the cluster's
//     (raftBindings over consensus.Sessions). It is authoritative, so a new
//     session is bound by compare-and-set through raft before its first
//     request is dispatched: of two nodes racing on a session one wins and
//     the other's request goes to the winner's engine. Lookups are local
//     reads of the applied state; only the leader writes the invalidation
//     of an engine that left.
//   - Readiness: a member serves (and /ready reports ready) only once it
//     has caught up with the leader (consensus.Node.CaughtUp) and its
//     registry has discovered the fleet (fleet.Plane.Discovered: the
//     engines answer kvr.<dc>.discover with their cards). Until then it
//     offers no engine, so it never takes a bound engine it has not heard
//     of yet for a departed one and moves the binding.
//   - Reconciliation: after a full restart the ownership comes back from
//     disk; the ready leader removes that of engines missing from the
//     registry twice in a row (engines that died while the cluster was
//     down, which no liveness timeout will ever remove).
//   - The cluster API (gRPC on Cluster.APIAddr) carries write forwarding
//     and ClusterAdmin; with the Cluster.TLS* files raft and the cluster API
//     use mutual TLS.
//
// # Selection edges
//
// Beside the OpenAI frontend, the node serves the selection API
// (node/selection: gRPC on Selection.Addr, its HTTP/JSON mirror on the
// frontend's listener) and the gateway's endpoint picker (node/extproc,
// Envoy ext_proc on Selection.ExtProcAddr), both deciding through the
// same dispatcher and session store; Selection.NoFrontend turns the
// OpenAI proxy off. Their gRPC listeners use the client-facing
// certificate and, with Selection.ClientCA, require client certificates
// (selection_edges.go). They stop after the frontend has drained.
//
// Stopping: when Run's context ends the node drains (drain.go,
// DrainConfig): /ready turns 503 first, the listener closes after
// ReadyDelay, requests get Timeout and are then ended with a
// shutting_down error event or status, and a raft leader transfers its
// leadership before raft stops.
//
// Concurrency: Run may be called once. Addr is safe to call from any
// goroutine after Run has started listening (WaitReady reports when);
// Ready and Cluster are safe at any time.
package node
