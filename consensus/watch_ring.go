package consensus

import (
	"fmt"
	"sort"
	"sync"

	"github.com/kvrouter/kvrouter/routing"
)

// Defaults of an OwnershipLog's bounds.
const (
	// DefaultWatchBatches keeps the last 4096 ownership-changing entries:
	// at the 1,000 entries/s a busy DC's batcher commits, about four
	// seconds of history, enough for a relay to reconnect to another node
	// without a snapshot.
	DefaultWatchBatches = 4096
	// DefaultWatchHashes bounds the hashes the ring holds (8 MiB of
	// sequence hashes), so that a burst of rank replacements cannot grow
	// it without limit; the newest batch is always kept.
	DefaultWatchHashes = 1 << 20
)

// OwnershipLog is the bounded ring of recent ownership batches of one FSM,
// with a notification for waiters. The FSM records changes into it while
// it applies an entry and seals them into a batch when the entry is done.
//
// Coverage: the log covers position p (the index a watcher applied up to)
// when p >= Start(): every ownership change of every entry after Start()
// is in the ring, in index order.
//
// Concurrency: the recording methods (unexported) are called only by the
// FSM under its write lock. Since, Changed, Start, Last, Stats and
// SetLimits are safe for concurrent use; they hold the log's mutex only
// to copy slice headers, so they never hold up apply.
type OwnershipLog struct {
	// pend and pendHash are the current entry's changes, owned by the
	// apply goroutine: each pending change's hashes run from its from to
	// the next change's from (or the end of pendHash).
	pend     []pendingChange
	pendHash []routing.SeqHash
	// pendBound and pendUnbound are the current entry's session changes
	// (watch_sessions.go), owned by the apply goroutine.
	pendBound, pendUnbound []uint64

	mu         sync.Mutex
	ring       []OwnershipBatch // live batches are ring[head:], oldest first
	head       int
	hashes     int
	start      uint64
	last       uint64
	wake       chan struct{}
	maxBatches int
	maxHashes  int
	stats      OwnershipLogStats
}

// pendingChange is one change of the entry being applied.
type pendingChange struct {
	kind routing.ChangeKind
	w    routing.Worker
	from int
}

// OwnershipLogStats are the log's counters.
type OwnershipLogStats struct {
	// Batches and Hashes are what the ring holds now (gauges).
	Batches, Hashes int
	// Sealed counts batches recorded; Evicted counts batches dropped to
	// stay within the bounds; Resets counts snapshot restores.
	Sealed, Evicted, Resets uint64
}

// newOwnershipLog returns an empty log that covers start on.
func newOwnershipLog(start uint64) *OwnershipLog {
	return &OwnershipLog{start: start, last: start, maxBatches: DefaultWatchBatches, maxHashes: DefaultWatchHashes}
}

// SetLimits changes the ring's bounds (values below 1 are taken as 1) and
// evicts what no longer fits.
func (l *OwnershipLog) SetLimits(batches, hashes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maxBatches, l.maxHashes = max(batches, 1), max(hashes, 1)
	l.evict()
}

// note records one block change of the current entry, merging it into the
// previous change when that has the same kind and rank.
func (l *OwnershipLog) note(kind routing.ChangeKind, w routing.Worker, h routing.SeqHash) {
	if n := len(l.pend); n == 0 || l.pend[n-1].kind != kind || l.pend[n-1].w != w {
		l.pend = append(l.pend, pendingChange{kind: kind, w: w, from: len(l.pendHash)})
	}
	l.pendHash = append(l.pendHash, h)
}

// stored records that w now holds h.
func (l *OwnershipLog) stored(w routing.Worker, h routing.SeqHash) {
	l.note(routing.ChangeStored, w, h)
}

// removed records that w no longer holds h.
func (l *OwnershipLog) removed(w routing.Worker, h routing.SeqHash) {
	l.note(routing.ChangeRemoved, w, h)
}

// rankCleared records that w dropped every block.
func (l *OwnershipLog) rankCleared(w routing.Worker) {
	l.pend = append(l.pend, pendingChange{kind: routing.ChangeRankCleared, w: w, from: len(l.pendHash)})
}

// workerRemoved records that every rank of id dropped every block.
func (l *OwnershipLog) workerRemoved(id routing.WorkerID) {
	l.pend = append(l.pend, pendingChange{kind: routing.ChangeWorkerRemoved, w: routing.Worker{ID: id}, from: len(l.pendHash)})
}

// seal turns the current entry's changes, if any, into the batch of index
// and pushes it. It is a no-op for an entry that changed no ownership.
func (l *OwnershipLog) seal(index uint64) {
	if len(l.pend) == 0 && len(l.pendBound) == 0 && len(l.pendUnbound) == 0 {
		return
	}
	var hs []routing.SeqHash
	if len(l.pendHash) > 0 {
		hs = make([]routing.SeqHash, len(l.pendHash))
		copy(hs, l.pendHash)
	}
	var cs []routing.Change
	if len(l.pend) > 0 {
		cs = make([]routing.Change, len(l.pend))
	}
	for i, p := range l.pend {
		end := len(hs)
		if i+1 < len(l.pend) {
			end = l.pend[i+1].from
		}
		cs[i] = routing.Change{Kind: p.kind, Worker: p.w}
		if end > p.from {
			cs[i].Hashes = hs[p.from:end:end]
		}
	}
	l.pend, l.pendHash = l.pend[:0], l.pendHash[:0]
	b := OwnershipBatch{Index: index, Changes: cs}
	l.sealSessions(&b)
	l.push(b, len(hs)+len(b.SessionsBound)+len(b.SessionsUnbound))
}

// push appends b, evicts beyond the bounds and wakes the waiters.
func (l *OwnershipLog) push(b OwnershipBatch, hashes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b.Prev = l.last
	l.ring = append(l.ring, b)
	l.last = b.Index
	l.hashes += hashes
	l.stats.Sealed++
	l.evict()
	l.notify()
}

// evict drops the oldest batches beyond the bounds, keeping the newest
// one; the start moves to the last evicted index. Callers hold mu.
func (l *OwnershipLog) evict() {
	for n := len(l.ring) - l.head; n > l.maxBatches || (n > 1 && l.hashes > l.maxHashes); n-- {
		old := &l.ring[l.head]
		l.start = old.Index
		l.hashes -= batchHashes(old)
		*old = OwnershipBatch{}
		l.head++
		l.stats.Evicted++
	}
	if l.head > 0 && l.head >= len(l.ring)/2 {
		// Readers copied the batches they took, so the live part can
		// move down in place: amortised O(1) per push, no allocation.
		n := copy(l.ring, l.ring[l.head:])
		clear(l.ring[n:])
		l.ring, l.head = l.ring[:n], 0
	}
}

// batchHashes counts the hashes of b.
func batchHashes(b *OwnershipBatch) int {
	n := len(b.SessionsBound) + len(b.SessionsUnbound)
	for _, c := range b.Changes {
		n += len(c.Hashes)
	}
	return n
}

// notify wakes every waiter of Changed. Callers hold mu.
func (l *OwnershipLog) notify() {
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}

// reset empties the ring after the FSM's tables were replaced by a
// snapshot at index: positions below it are no longer covered.
func (l *OwnershipLog) reset(index uint64) {
	l.pend, l.pendHash = l.pend[:0], l.pendHash[:0]
	l.pendBound, l.pendUnbound = l.pendBound[:0], l.pendUnbound[:0]
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.ring)
	l.ring, l.head, l.hashes = l.ring[:0], 0, 0
	l.start, l.last = index, index
	l.stats.Resets++
	l.notify()
}

// Start returns the lowest position the log covers.
func (l *OwnershipLog) Start() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start
}

// Last returns the index of the newest batch, or Start when the ring is
// empty.
func (l *OwnershipLog) Last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// Covers reports whether a watcher at position from can be served from
// the ring.
func (l *OwnershipLog) Covers(from uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return from >= l.start
}

// Since appends to dst up to max batches (max < 1: all) with an index
// above from, oldest first, and returns dst. It returns ErrWatchOverrun
// when from is below the log's start. The batches are shared: do not
// modify them.
func (l *OwnershipLog) Since(from uint64, dst []OwnershipBatch, max int) ([]OwnershipBatch, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if from < l.start {
		return dst, fmt.Errorf("%w: position %d below the ring's start %d", ErrWatchOverrun, from, l.start)
	}
	live := l.ring[l.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].Index > from })
	end := len(live)
	if max > 0 {
		end = min(end, i+max)
	}
	return append(dst, live[i:end]...), nil
}

// Changed returns a channel that is closed at the next push or reset.
// Take it before calling Since, so that no push falls in between.
func (l *OwnershipLog) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	return l.wake
}

// Stats returns the log's counters.
func (l *OwnershipLog) Stats() OwnershipLogStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Batches, s.Hashes = len(l.ring)-l.head, l.hashes
	return s
}
