// Package inproc is the in-process tier of the chaos suite: a real raft
// cluster (hashicorp/raft over InmemTransport, with partition hooks) whose
// members keep their raft log and FSM tables in real Pebble stores on
// in-memory file systems (vfs.MemFS, crashable, wrapped by errorfs), and
// their snapshots in raft's file snapshot store in a temporary directory.
// Each member serves its cluster API (status, join, leave) over gRPC on an
// in-memory listener (bufconn), which a follower asks for the leader's
// commit index and a rebuilt member rejoins through.
// It runs the storage and snapshot scenarios of the reliability plan,
// each test named after its row:
//
//	TestS11DiskFullLeader, TestS11DiskFullFollower  free space below the reserve, ENOSPC on table writes
//	TestS12SlowDisk                                 fsync latency on the leader
//	TestS13PowerLossMinority                        crash image without unsynced writes, pause-kill
//	TestS14CorruptedSnapshot                        bit flip in the newest snapshot, follower then leader
//	TestS15CorruptedStoreMinority                   bit flip in an FSM table file of one member
//	TestS15CorruptedRaftLogMinority                 bit flips in one member's raft WAL: rebuilt from its peers
//	TestS16SnapshotInstallUnderLoad                 a follower cut off until it needs a snapshot
//
// The multi-process scenarios (real processes, NATS, disks) live in
// package chaos; this tier needs no ports and no processes, so it runs in
// `make test`.
//
// # What every scenario checks
//
// A workload of session binds (unique keys, one request id each) runs
// against whichever member is the ready leader, and records every
// operation's outcome: ok (acknowledged), fail (refused, nothing was
// proposed) or indeterminate. After the fault heals the checker requires:
// every acknowledged bind present, with its worker and version, on every
// member (0 lost); no refused bind present (0 unexpected); every member's
// FSM state hash equal at one applied index. Each test logs one report
// line and writes a JSON report (scenario, seed, operations by outcome,
// verdicts, unavailability window, time to converge) into
// KVRTEST_CHAOS_REPORT_DIR, or the test's temporary directory.
//
// # Duration and seeds
//
// The default run is short (a few seconds per scenario, about 30 s for the
// package on two cores). KVRTEST_CHAOS_SECONDS stretches each scenario's
// load phases (`make chaos` sets it); KVRTEST_CHAOS_SEED fixes the seed, which
// every report prints.
//
// # Failpoints
//
// internal/failpoint plants named points in consensus and store; they are
// compiled in only with `-tags chaos`. The tests in failpoints_test.go
// carry that tag: they hold a snapshot install between its verification
// and its swap (restoreBeforeSwap) and show the follower serves neither a
// partial nor an empty state meanwhile, and show that every planted point
// is reached. `make chaos` runs the package with the tag.
package inproc
