// Package queue is the router's admission queue: requests that arrive
// while every eligible worker is busy wait here, in policy classes, and
// leave in the order the reference router defines.
//
// # Glossary
//
//   - Class: a physical policy class (see routing/policyclass). Each has
//     its own ordered heap, its own lanes, its own busy thresholds (held by
//     the caller), queue limits, DRR quantum and deficit, and counters.
//   - Shared heap: a class's requests that any eligible worker may take.
//   - Lane: a class's requests that only one exact worker may take (pinned,
//     or bound to a session), or only one set of workers (a gateway's
//     endpoint subset); one heap per worker or set.
//   - Order: fcfs or wspt, the key each heap sorts by (see Order).
//   - Deficit round robin (DRR): how classes share dispatch. Each class
//     earns Quantum tokens of credit per visit and spends a request's cost
//     (its uncached prompt tokens at enqueue, at least 1) to dispatch it.
//
// # Ordering
//
// A heap is ordered by (Strict descending, key descending, arrival
// sequence ascending). fcfs: key = Jump - Arrival (seconds), so a priority
// jump moves a request's arrival earlier by that many seconds; this bounds
// tail TTFT. wspt: key = (1 + Jump) / Cost with Cost = max(1, ISL -
// Cached): shortest weighted processing time first, which minimises mean
// TTFT.
//
// # Arbitration
//
// Next runs work-conserving DRR over the classes, from a ring cursor. A
// class's candidate is the best of its shared head (when some worker can
// take it) and the heads of the lanes whose workers can take them; the
// caller's ready function says which. An empty class's deficit resets to
// zero; a class with requests but no ready candidate keeps its deficit and
// earns nothing. At the cursor a class dispatches when its deficit covers
// the candidate's cost; otherwise it earns one quantum for this visit and
// dispatches if that covers it, else the cursor moves on. The cursor stays
// on a class while its next head is affordable (a weighted burst). After a
// full ring without a dispatch, every ready class earns the smallest
// number of virtual rounds k = min over ready classes of
// ceil((cost - deficit) / quantum), k times its own quantum, so one call
// costs O(C + log L) and never loops on large costs.
//
// # Limits
//
// A class's limits (requests, raw ISL tokens, cached tokens) are per
// worker: the effective limit is the value times the current worker count
// given to Push. They are checked before the request is added: the request
// that crosses a limit is admitted and the next one is refused with a
// *LimitError (ErrLimit). Removing workers does not evict queued requests.
//
// # Refusals and concurrency
//
// The package does no I/O and reads no clock: arrival times are the
// caller's. Nothing panics on input; bad items are refused with ErrInvalid.
// A Queue is not safe for concurrent use: its owner serialises calls
// (node/dispatch holds a mutex per model; the simulator is single
// threaded).
package queue
