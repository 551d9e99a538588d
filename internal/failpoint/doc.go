// Package failpoint plants named fault-injection points in the raft, store
// and relay code, compiled in only for chaos builds.
//
// A failpoint is a call Inject(name) at a code point the reliability plan
// names (before and after apply, log sync, snapshot persist, restore swap,
// barrier, publish). In a normal build Inject is an empty function the
// compiler inlines away: the product carries no hook, no lock and no
// branch. Built with `-tags chaos` (`make chaos`), Inject runs the Action
// a test enabled for the name (a sleep, a panic, an error callback) and
// counts every hit, so a test can also show a point was reached.
//
// The package is written here rather than taken from gofail because
// gofail rewrites comments into code with a generator step and serves
// toggles over HTTP; the in-process chaos tier only needs typed,
// in-memory toggles, and a build tag keeps the product free of them.
//
// Concurrency: Enable, Disable, Hits and Inject are safe for concurrent
// use. An Action runs on the goroutine that reached the point.
package failpoint

// The failpoints, named <pkg><When><What> after the reliability plan.
const (
	// FSMBeforeApply and FSMAfterApply bracket the FSM's apply of a batch
	// of committed entries.
	FSMBeforeApply = "fsmBeforeApply"
	FSMAfterApply  = "fsmAfterApply"
	// ConsensusAfterCommitBeforeAck runs on the leader once an entry is
	// applied, before its proposer gets the result.
	ConsensusAfterCommitBeforeAck = "consensusAfterCommitBeforeAck"
	// StoreBeforeSyncLogs and StoreAfterSyncLogs bracket the synced raft
	// log append.
	StoreBeforeSyncLogs = "storeBeforeSyncLogs"
	StoreAfterSyncLogs  = "storeAfterSyncLogs"
	// SnapshotBeforePersist and SnapshotAfterPersist bracket the writing
	// of an FSM snapshot to raft's snapshot store.
	SnapshotBeforePersist = "snapshotBeforePersist"
	SnapshotAfterPersist  = "snapshotAfterPersist"
	// RestoreBeforeSwap and RestoreAfterSwap bracket the replacement of
	// the FSM's tables by a verified snapshot.
	RestoreBeforeSwap = "restoreBeforeSwap"
	RestoreAfterSwap  = "restoreAfterSwap"
	// LeaderBeforeBarrier and LeaderAfterBarrierBeforeReady bracket a new
	// leader's barrier, before it serves binds.
	LeaderBeforeBarrier           = "leaderBeforeBarrier"
	LeaderAfterBarrierBeforeReady = "leaderAfterBarrierBeforeReady"
	// RelayBeforePublish runs before a relay publishes a summary update
	// to its subscribers.
	RelayBeforePublish = "relayBeforePublish"
)

// Action is what an enabled failpoint does when reached: sleep, panic or
// call back (a test's hook, which may block until released).
type Action func()
