// Package consumer mirrors other DCs' pool summaries and answers cross-DC
// prefix queries: one Lane per remote (dc, pool) keeps that pool's summary
// (a cuckoo or Bloom filter) up to date over the publication protocol (relay/publish), and
// Consumer.Query returns, for one cache domain, each DC's longest request
// prefix that is probably present there.
//
// # Guarantees
//
//   - A lane's filter is always a consistent image the producer published:
//     the snapshot, then deltas applied whole (filter.Summary.Apply validates
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
// # Glossary
//
//   - Lane: one remote DC pool's filter as this relay sees it, the
//     mirror of that pool's summary kept current over one subscription,
//     with the pool's load and the time it was last heard from. A lane is
//     named by its PoolID (DC and cache domain); a query searches the
//     lanes of one domain.
//   - Depth: the number of leading blocks of a request a lane probably
//     holds (its longest present prefix).
//   - Probe: one filter lookup of one block in one lane's filter.
//   - Gain: what the caller's Objective says a lane is worth at a depth,
//     Slope×depth + Intercept; the intercept carries the round trip and
//     load of the lane's DC. minGain is the gain a lane must exceed to be
//     chosen at all (the local DC's own gain, for the gateway).
//   - Candidate: a lane Best still considers, with the bracket [lo, hi]
//     its depth is known to lie in; the leader is the candidate with the
//     largest gain known so far.
//   - Round: the probes Best issues together, one per candidate, read at
//     once so that their cache misses overlap.
//
// # Two questions: every depth, or the best lane
//
// Query answers every lane's depth; the gateway's /v1/route/explain shows
// them. Serving a request needs less: the one lane, if any, whose gain
// exceeds minGain by the most, and its depth. Best answers that, given
// the gateway's formula as an Objective, and returns what BestOf over
// Query's results would (property test). Its search (bestSearch) settles
// a lane that cannot beat the leader with one probe at the depth it would
// need, and finds only the winner's depth exactly, so a 16-lane request at
// mixed depths costs about 60 probes instead of about 180; it reads each
// round's probes together (filter.HitAll) so that their cache misses
// overlap (a Bloom lane's probes are answered one by one: the library's k
// bit reads cannot be split). Out of cache, where the probes are most of a
// query's time, it is several times faster than Query (docs/benchmarks.md). The objective
// is the caller's; the consumer knows nothing of the policy.
//
// A transposed second copy of each domain's filters, searched with AVX2,
// once took the cold p99 of Best from about 6 µs to about 4 µs, at twice
// the filters' memory and about 700 lines; against the gateway's 47 µs
// added latency and a WAN round trip of about 150 ms, that was not worth
// keeping, and Best reads the lanes' own filters only.
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
// # What it refuses to do
//
// It does not dial: the caller passes a kvrpb.RelayClient on a connection
// it built (publish.DialOptions with its TLS credentials). It does not
// weigh DCs itself (Best maximises the caller's objective; the gateway's
// policy weighs depth, staleness and load), and does not read the clock
// except through Config.Now.
package consumer
