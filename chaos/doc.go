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
// longer under `make chaos` (KVRTEST_CHAOS_SECONDS). Seeds are fixed and
// printed; KVRTEST_CHAOS_SEED replays one. On a linearizability failure the
// porcupine visualisation is written to the artifact directory. Child
// processes get this process's environment without the suite's
// KVRTEST_CHAOS_* settings.
//
// # Scenarios
//
// Each test is named after its row of the reliability plan (S01-S22; the
// in-process tier S11-S16 lives in chaos/inproc), and docs/reliability.md
// maps them with the command for each:
//
//   - S01 kills the leader during binds; S02 stops it with SIGSTOP for
//     three election timeouts; FullClusterRestart kills every node at once.
//   - S03 blackholes the leader's (LeaderIsolated) or a follower's
//     (MinorityPartition) raft and cluster API links and heals them; S04
//     flaps partitions of the leader and a random peer over five members
//     for ten rounds. Both go through linknet, a loopback proxy in front of
//     every member's listeners that tells the dialling member by the
//     process owning the connection's other end (/proc), so one direction
//     of one link can be cut.
//   - S05 cuts the WAN between two DCs' relays; S06 degrades it (150 ±
//     100 ms, 5 % loss as retransmission delays); S07 kills and restarts a
//     relay (RelayFailoverTwoPerDC is its two-relays-per-DC form).
//   - S08 makes an engine drop event batches (sequence gaps repaired by
//     replay); S09 restarts an engine with an empty cache and its sequence
//     at 0; both end with the node's index equal to every engine's true
//     cache.
//   - S10 stops the DC's NATS server under load and starts it again.
//   - S17 adds and removes voters under load (MembershipChange) and
//     upgrades a cluster of the previous release one member at a time
//     (RollingUpgrade).
//   - S18 replays a corpus of malformed requests against a live node (the
//     parsers' fuzz targets are in internal/oaiedge); S19 sends huge
//     bodies, prompts and chats; S20 holds connections trickling headers
//     and bodies; S21 kills or pauses an engine mid-stream; S22 offers five
//     times a nominal rate, about twice what engines behind busy thresholds
//     accept.
//   - DisaggPrefillKill runs two prefill and two decode engine processes
//     behind the cluster: every request is served by one of each, a
//     shared prefix is prefilled on the engine caching it, and a prefill
//     engine killed mid-run loses no request (its prefills move to the
//     other engine, or get a clean 5xx, never a half-streamed answer).
//   - DrainLeaderDuringStreams and BackupRestoreIntoFreshCluster test the
//     operations of the same names; OverloadBurst sends a burst of many
//     times what two slow engines take at once through nodes running the
//     admission queue (two policy classes) and checks that each request is
//     served or refused with 529, Retry-After and the structured
//     policy-class body, that every served binding survives, and that
//     every queue drains.
//
// # One checker, one report
//
// checkAll is every bind scenario's checker: a substantial workload, no
// session served by two engines, equal FSM state hashes (AdminStatus'
// state_hash at the same applied index) on every live member, no lost
// acknowledged binding, a linearizable history. Every run writes a report
// (report.json in the test's artifact directory, kept with `go test
// -artifacts`; a REPORT line in the log; a markdown row appended to the
// file KVRTEST_CHAOS_REPORT names): scenario, seed, git SHA, operations by
// outcome, verdicts, unavailability windows (fault to the first new
// binding acknowledged after it), times to converge (heal to every member
// applying the leader's commit index), the scenario's own figures, and
// the peak RSS, goroutines and open files of every node process, sampled
// from /proc and the nodes' metrics.
//
// # Tiers
//
// `make test` runs S01, S02, FullClusterRestart, S05, S08, S09, S18, S21,
// DisaggPrefillKill and the operations tests in their short forms; every other scenario
// skips unless KVRTEST_CHAOS_SECONDS is set, as `make chaos` does.
// KVRTEST_CHAOS_PORTS=lo-hi confines the suite's listeners (nodes, NATS,
// engines, proxies of the cluster links) to a port range; the WAN proxies
// of internal/netem still take ephemeral ports. The suite needs only
// loopback, so it runs in a private network namespace:
//
//	unshare -rn sh -c 'ip link set lo up && KVRTEST_CHAOS_PORTS=20000-20999 make chaos'
//
// Child processes get this process's environment without the suite's
// KVRTEST_CHAOS_* settings.
package chaos
