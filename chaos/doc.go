// Package chaos is the fault-injection suite of a DC's router cluster:
// real `kvrouter node` processes on loopback, in raft over real TCP with
// Pebble on disk, a real NATS server and simulated engines, driven by
// concurrent clients while processes are killed with SIGKILL and
// restarted.
//
// # What it checks
//
// Every client operation is a routed request of one session in hard
// affinity mode, recorded with its call and return times on one monotonic
// clock: the engine that served it, or "indeterminate" when the request
// failed after it may have reached a node. While engines stay alive a
// session in hard mode is a write-once register (the first request binds
// it, every later one must be served by the bound engine), so:
//
//   - the history must be linearizable against that model, partitioned by
//     session, checked with porcupine (an indeterminate operation may or
//     may not have bound the session, to any engine);
//   - no session may be served by two different engines (the affinity
//     violations the issue counts);
//   - every acknowledged binding must survive: after the faults, each
//     session that was served is routed again through every node and must
//     land on its engine (acknowledged binds lost).
//
// A failed connection (nothing listened) is not recorded: the request
// never reached a node and cannot have bound anything.
//
// # How it runs
//
// TestMain builds the kvrouter binary once into a temporary directory.
// The NATS server and the engines run inside the test process (they are
// not under test), except in S21, which kills an engine; the router nodes
// are child processes whose logs are kept in the test's temporary
// directory and printed on failure. Durations are short in `make test` and
// longer under `make chaos` (KVR_CHAOS_SECONDS). Seeds are fixed and printed; KVR_CHAOS_SEED
// replays one. On a linearizability failure the porcupine visualisation
// is written next to the logs.
//
// The scenarios are named after the reliability plan: S01 kills the leader
// during binds; S02 stops it with SIGSTOP for three election timeouts and
// lets it continue, with the same checks; FullRestart kills every node at once and restarts them;
// S21 kills an engine process (`kvrouter mocker`, the one scenario whose
// engines are processes) under streaming load, or stops it with SIGSTOP,
// and checks that every request sent after the kill (or after every node
// dropped the paused engine) is served, that the requests the engine held
// end then, that a session moves only off that engine, and that the
// nodes' booked load returns to zero;
// FederationRelayKillAndWANCut runs two DCs whose relays reach each other
// through a delaying proxy per direction (internal/netem), cuts and
// restores that WAN and kills one relay, and checks that each DC serves
// its own traffic during the cut, that the summaries reconverge (a prefix
// cached in one DC draws the other DC's request, which the gateway's
// POST /v1/route/explain confirms before the request is sent), and that
// no session is served by two DCs; RelayFailoverTwoPerDC runs two relays
// per DC, kills one of the forwarding DC and then one of the serving DC
// under traffic, and reports failures and summary staleness;
// DrainLeaderDuringStreams sends SIGTERM to the leader during 50 streams
// (readiness off before the listener closes, every stream complete or
// ended by a shutting_down event, leadership moved before exit, no
// acknowledged binding lost); BackupRestoreIntoFreshCluster runs `kvrouter
// cluster backup` and `restore` between two clusters; RollingUpgrade
// (make chaos only) upgrades a cluster of the previous release, built from
// its git tag, one member at a time. OverloadBurst starts the nodes with
// the admission queue (two policy classes, small per-worker limits) over
// two slow engines, sends a burst of many times what they take at once
// through every node, and checks that each request is served or refused
// with 529, Retry-After and the structured policy-class body, that every
// served session's binding survives, and that every queue drains. Child
// processes get this process's
// environment without the suite's KVR_CHAOS_* settings.
package chaos
