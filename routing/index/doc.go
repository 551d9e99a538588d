// Package index holds kvrouter's prefix indexes: which worker (engine and
// data-parallel rank) holds which prefix of a request's KV blocks.
//
//   - Exact is fed by the workers' KV events (stored, removed, cleared) and
//     knows, per block and worker, the storage tiers (device, host, disk,
//     and the shared store of routing.TierShared).
//   - Approx is fed by the router's own routing decisions when engines
//     publish no events; it forgets blocks by TTL (with a size bound) or
//     by modelling each worker's LRU cache at its advertised capacity.
//   - NewSide builds the predict-on-route side index, a short-TTL Approx
//     that covers the gap between a routing decision and the events it
//     causes; MergeDevice combines its matches with the exact index's.
//
// # Guarantees
//
// Every index answers FindMatches with, per worker holding the request's
// first block, the routing.Overlap of the request's prefix: the device
// depth from block 0, then the host run that continues it, then the disk
// run after that (Approx knows the device tier only). Results are sorted
// by worker (engine id, then rank) and workers with no overlap are
// omitted, so equal inputs give equal outputs. The shared tier is nobody's
// own prefix: Exact.SharedRanges answers, for a request, the runs of
// positions whose block any worker stored there, the same for every
// worker (HitsBeyond counts a worker's hits past its device prefix). No method reads the clock:
// time comes in as time.Time arguments. Bad input (a malformed event, an
// invalid config) is rejected with an error wrapping a sentinel and never
// panics.
//
// Event ordering (CheckNext, used by Exact.Apply and by every other keeper
// of a cursor). Each worker has a cursor, the id of its last applied
// event. id == cursor+1 applies. id <= cursor is a duplicate:
// ErrStale, ignored. id > cursor+1 is a gap: ErrGap, nothing applied, the
// cursor stays, and the caller resyncs the worker with ReplaceWorker. An id
// of 1 after a cursor above 1 is an engine restart: the worker is cleared,
// then the event applies (after a cursor of exactly 1 it is a duplicate).
// An owner that keeps the cursor itself (the raft FSM) applies the rule
// and feeds the index with ApplyAdmitted, so a rank has one cursor rule
// applied once.
// A stored event whose parent engine id is unknown for its worker places
// none of its blocks and returns ErrUnknownParent, but its id is consumed,
// because the engine will not resend it.
//
// Engine ids. Removals carry only the engine's opaque block ids, so each
// worker keeps an engine-id to sequence-hash map. An entry lives while the
// worker holds its block on some tier. An engine id names one block at a
// time: storing an id that named another block drops that block from every
// tier of the worker. A removal whose id is unknown, or whose block is not
// held on the event's tier, is an idempotent no-op counted in
// ExactStats.UnknownRemovals.
//
// # What it refuses to do
//
// The exact index never guesses: it is not fed predictions (Approx and the
// side index are) and it does not reorder, buffer or replay events; gap
// recovery belongs to the event consumer. The approximate indexes never
// claim host or disk tiers. Neither index persists anything.
//
// # Concurrency
//
// All exported methods are safe for concurrent use. Each index has one
// sync.RWMutex: writers (Apply, ApplyAdmitted, ReplaceWorker, RemoveWorker, RemoveEngine;
// Record, Release, SetWorker, Prune) hold it exclusively for one event or
// one request, readers (FindMatches, Cursor, Stats, Workers) share it. The
// intended shape is one event-applying goroutine per index and many
// routing goroutines. ReplaceWorker is atomic: readers see the worker's old
// state or its new one. A table resize happens under the write lock and
// stalls readers for its duration (tens of milliseconds at a million
// blocks, once per 12.5% growth).
//
// # Exact index layout
//
// The targets are a million (worker, block) pairs at under 48 bytes each,
// engine-id maps included, with a 24-block lookup in a few microseconds, so
// the layout avoids Go maps (about 26 bytes per 16-byte entry after load
// factor and control bytes) and per-block pointers:
//
//   - Workers are interned to uint32 slots. An owner word packs a slot and
//     its tier bits into 32 bits: slot<<4 | tiers.
//   - The block table maps a SeqHash to an owner set of 8 bytes: up to two
//     owner words inline, sorted by slot. A third owner moves the set to an
//     overflow list (sorted words) and the inline word then holds the list
//     index. Most blocks have one or two owners, so the common entry is 16
//     bytes with no pointer for the garbage collector to scan.
//   - Each worker's engine-id map is the same kind of table, 16 bytes per
//     entry (engine id, SeqHash).
//   - The table (table.go) is open addressing with sorted linear probing
//     (Robin Hood order) over a power-of-two-free capacity: the home slot
//     is the multiply-high of the mixed key and the capacity, so the table
//     can grow by 9/8 at 4/5 load and its load stays within 0.71-0.8.
//     Keys past the last home spill into a small slack instead of wrapping.
//     Deletion shifts the run back, leaving no tombstones. Memory per pair
//     is therefore about 16/0.75 bytes for the block (when blocks are not
//     shared) plus 16/0.75 for the engine-id entry, with the slack: about
//     44 bytes on average and at most about 47 just after a resize of both.
//     A higher load would save memory but lengthen the runs that inserts
//     and deletes shift (see table.go).
//   - A query walks the request's hashes from block 0 with the workers
//     holding block 0 as candidates, kept sorted by slot so that each
//     block's owner set is merged with them in one pass, and stops when
//     no candidate continues. Block lookups are independent of each other,
//     so the query resolves them in windows (8 blocks, then 16, then 32),
//     first loading every slot of the window and the owner lists they
//     point to: the cache misses then overlap instead of being serialized
//     by the data-dependent branches of each lookup.
//
// # Approximate index layout
//
// Approx has no hard memory target and uses Go maps: SeqHash to the list
// of (slot, depth, expiry) copies. The TTL policy keeps a min-heap of
// expiries with lazy deletion (a refresh pushes a new item, a popped item
// that no longer matches its entry is skipped, the heap is rebuilt when
// stale items outnumber live ones). The LRU policy keeps, per worker, the
// reference count of each block and a heap of unreferenced blocks ordered
// by release epoch, deeper positions first.
package index
