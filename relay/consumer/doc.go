// Package consumer mirrors other DCs' pool summaries and answers cross-DC
// prefix queries: one Lane per remote (dc, pool) keeps that pool's cuckoo
// filter up to date over the publication protocol (relay/publish), and
// Consumer.Query returns, for one cache domain, each DC's longest request
// prefix that is probably present there.
//
// # Guarantees
//
//   - A lane's filter is always a consistent image the producer published:
//     the snapshot, then deltas applied whole (filter.Cuckoo.Apply validates
//     before it writes) in contiguous order. Any error (gap, lag, producer
//     change, corrupt payload, transport failure) ends the subscription and
//     the lane resubscribes, which starts with a fresh snapshot; until then
//     it keeps answering from its last image and its staleness grows.
//   - Resubscription never stops and never hammers: after PRODUCER_CHANGED,
//     RESYNC or GAP the first retry is immediate, otherwise delays double
//     from BackoffBase to BackoffMax with jitter drawn from a per-lane
//     generator seeded by Config.Seed; a session that delivered a snapshot
//     resets the backoff. UNKNOWN_POOL and CONTRACT_MISMATCH retry only at
//     BackoffMax.
//   - No false negatives from the search: if a lane's filter holds the
//     first k blocks of a request, the depth is at least k (property test);
//     the depth always ends at a miss or at the request's end.
//
// # Two questions: every depth, or the best lane
//
// Query answers every lane's depth; the gateway's /v1/route/explain shows
// them. Serving a request needs less: the one lane, if any, that beats the
// local DC by the most under the gateway's formula, and its depth. Best
// answers that, given the formula as an Objective (a gain linear in depth
// at one slope for all lanes, plus a per-lane intercept for round trip and
// load), and returns what BestOf over Query's results would (property
// test). Its search (bestSearch) settles a lane that cannot beat the lead
// with one probe at the depth it would need, and finds only the winner's
// depth exactly, so a 16-lane request at mixed depths costs about 60
// probes instead of about 180; it reads each round's probes together
// (filter.HitAll) so that their cache misses overlap. Out of cache, where
// the probes are most of a query's time, it is several times faster
// (docs/benchmarks.md). The objective is the caller's; the consumer knows
// nothing of the policy.
//
// # The stack: one domain's filters side by side
//
// Relays build every pool's summary with the same seed and default size,
// so the lanes of a domain usually hold filters of one geometry, which
// put a block in the same two buckets. The consumer keeps a second copy of
// those filters, transposed (filter.Stack: bucket i of every lane side by
// side), and Best reads it: one lookup of two rows tests a depth in every
// stacked lane, where their own filters take two cache lines each, so
// Best can probe every stacked lane at eight depths a round for less than
// one depth each costs in their own filters. At the benchmark's mixed
// depths that is 1.6 rounds of 14 lookups instead of seven rounds of 60
// probes, and the search's p99 out of cache drops below 5 µs. The copy
// doubles the memory of the stacked lanes' filters (64 MiB for 16 pools of
// the default size); Config.NoStack turns it off. Lanes of another
// geometry (a pool that grew, another kind) are searched in their own
// filters, in the same rounds; the stack follows the geometry most ready
// lanes share, and a domain where no two share one has none, nor has
// the session summary's domain, which only Query reads. Query and the
// verification of a lane that is not stacked read the lanes' own filters.
//
// # How staleness is measured
//
// A lane stamps, with Config.Now, every snapshot, delta and heartbeat it
// applies; its staleness is the query's now minus that stamp. Heartbeats
// make it a liveness measure even when the pool is idle: with heartbeats
// every H, a healthy lane's staleness stays below H plus the one-way
// delay, and a lane whose link or peer failed shows it growing. It uses
// only the local clock, so clock skew between DCs does not enter it. The
// benchmark BenchmarkStaleness150msRTT measures the other figure that
// matters, change-to-visible time from the producer's Apply to the lane's
// apply, under a 150 ms round trip and one forced resubscription.
//
// # Why galloping
//
// A prefix query wants the boundary between present and absent blocks.
// Most lanes miss at block 0 and cost one probe. Otherwise, galloping
// (positions 1, 2, 4, ...) finds a bracket in O(log d) probes for an answer
// d, cheaper than binary search over the whole request when prefixes are
// short and never worse than twice it; binary search then closes the
// bracket, and a verification window re-tests the positions just below the
// depth, where a false positive at a probed position would otherwise let
// the depth jump over absent blocks. The search assumes prefix-monotone
// membership; a hole that no probe lands on is not seen (tests document
// it), which costs at most a wrongly long prefix estimate, never a wrongly
// served request, because the chosen DC runs its exact selection.
//
// # Concurrency and locking
//
// Consumer is safe for concurrent use. Each lane has one goroutine, owned
// by the Consumer and stopped by RemoveLane or Close (which waits for all
// of them). The lane set is an immutable value behind an atomic pointer,
// so queries take no consumer-wide lock. The lanes of one cache domain
// share a sync.RWMutex: a lane's goroutine takes the write lock to apply
// one event (a delta of a few dozen images costs about 2 µs on a 2^19-bucket
// filter, BenchmarkApplyLocked), and a query takes the read lock once for
// all the lanes it searches. One lock per lane was the first design; its
// two atomic operations per lane and query were a fifth of a hot 16-lane
// query on the development VM, while a domain's deltas arrive a few dozen
// times a second per lane and hold the lock for microseconds, so sharing
// the lock costs a query almost nothing in waiting. Copy-on-write was measured and rejected: a
// whole-filter copy of a 4 MiB lane costs about 6 ms per delta
// (BenchmarkCopyOnWriteClone), over a thousand times the locked apply,
// and page-granular copy-on-write needs access to the filter's words that
// relay/filter does not expose.
//
// The stack is written under the same lock: a delta's images go to the
// lane's column in the same critical section as to its filter, so a
// stacked column always equals its filter when the lock is free. A
// filter is copied into a column 32,768 buckets per hold of the lock
// (about half a millisecond; a whole default filter takes about 7 ms,
// BenchmarkStackLoad), and the lane is searched in its own filter until
// the copy is whole; deltas that land meanwhile go to the column too. A
// lane that joins the domain takes a free column of its stack (its filter
// comes later, by a snapshot), and one that leaves frees its column:
// neither copies the other lanes' filters. Only a lane that finds no free
// column (the width is a power of two), a domain's first stack, a
// geometry that more lanes now share, or a stack that fewer than two
// lanes fit, rebuilds the stack, with one such copy per ready lane, made
// by whoever caused the rebuild after it releases the lock; until then
// the domain's queries read those lanes' own filters and never wait for
// more than a chunk.
//
// # What it refuses to do
//
// It does not dial: the caller passes a kvrpb.RelayClient on a connection
// it built (publish.DialOptions with its TLS credentials). It does not
// weigh DCs itself (Best maximises the caller's objective; the gateway's
// policy weighs depth, staleness and load), does not
// mirror Bloom summaries, and does not read the clock except through
// Config.Now.
package consumer
