package load

import (
	"fmt"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// Request is what Add books: one routed request and the worker it was sent
// to.
type Request struct {
	// ID is the caller's request id; it must be unique among active
	// requests.
	ID string
	// Worker is the rank the request was dispatched to.
	Worker routing.Worker
	// Hashes are the chained sequence hashes of the prompt's complete blocks
	// (routing.BlockHashes). They are what KV-reuse de-duplication compares.
	Hashes []routing.SeqHash
	// ISLTokens is the prompt length in tokens. It must cover the hashed
	// blocks; tokens beyond them occupy private blocks.
	ISLTokens int
	// CachedBlocks is the device-tier prefix the worker already held when the
	// request was routed (routing.Overlap.Device); those tokens need no
	// prefill.
	CachedBlocks int
	// OutputTokens is the expected output length (the client's osl hint),
	// 0 when unknown. With TrackOutputBlocks the blocks that output will
	// fill are booked at Add, so that a long generation weighs from the
	// start rather than only as it grows; tokens reported by
	// AddOutputTokens grow the booking only past that expectation, and
	// the output's weight decays as they approach it (output.go).
	OutputTokens int
}

// active is the tracker's record of one active request.
type active struct {
	worker routing.Worker
	// hashes is a private copy of the prompt hashes, kept only when KV
	// reuse is assumed, to release the shared blocks on Free.
	hashes        []routing.SeqHash
	isl           int64
	prefillTokens int64 // uncached tokens still counted as prefill load
	decodeBlocks  int64 // prompt blocks this request added beyond shared ones
	outputTokens  int64
	// expectedTokens is the expected output length and expectedOut the
	// output blocks booked at Add from it (0 without one or without
	// TrackOutputBlocks).
	expectedTokens int64
	expectedOut    int64
	// outMilli is the weight of the request's output blocks, in
	// thousandths of a block (output.go).
	outMilli int64
	added    time.Time
}

// Tracker is the active-load tracker. Create it with New.
type Tracker struct {
	cfg       Config
	blockSize int64

	mu       sync.RWMutex
	workers  map[routing.Worker]*workerState
	requests map[string]*active
	expired  uint64
	// spares are the states of workers that went idle, with their emptied
	// reference tables, handed to the next workers that become active. A
	// worker going idle between requests is the common case at moderate
	// load, and rebuilding a table of a prompt's blocks for every request
	// costs more than the bookkeeping itself. With a single spare table,
	// two workers going idle in turn still built one per request (each
	// idle worker's table replaced the other's), so up to maxSpares are
	// kept. Only tables that stayed small are kept (see maxSpareRefs),
	// which bounds the memory held for idle workers.
	spares []*workerState
	// records holds the records of freed requests, with their hash slices,
	// for reuse by Add: copying a long prompt's hashes into a fresh slice
	// for every request would make the tracker a steady source of garbage
	// at a thousand requests a second.
	records []*active
}

// maxSpareRefs is the largest reference table, in entries it once held,
// that is kept as a spare: a table keeps its peak size after its entries
// are removed. 64Ki blocks are a few long prompts; 2 MiB of slots.
const maxSpareRefs = 64 << 10

// maxSpares bounds the spare tables: as many workers as go idle and busy
// in turn on a node's fleet at moderate load, and at most 16 MiB in all.
const maxSpares = 8

// maxFreeRecords and maxFreeHashes bound Tracker.records: 64 records of at
// most 16Ki hashes (a 1M-token prompt at block size 64) hold at most 8 MiB.
const (
	maxFreeRecords = 64
	maxFreeHashes  = 16 << 10
)

// New returns an empty tracker, or an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Tracker{
		cfg:       cfg,
		blockSize: int64(cfg.BlockSize),
		workers:   make(map[routing.Worker]*workerState),
		requests:  make(map[string]*active),
	}, nil
}

// Config returns the configuration the tracker was created with.
func (t *Tracker) Config() Config { return t.cfg }

// Add books a request on its worker at time now.
func (t *Tracker) Add(r Request, now time.Time) error {
	if err := t.checkRequest(r); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, dup := t.requests[r.ID]; dup {
		return fmt.Errorf("%w: %q", ErrDuplicateRequest, r.ID)
	}
	a := t.newActive()
	*a = active{worker: r.Worker, isl: int64(r.ISLTokens), added: now, hashes: a.hashes[:0]}
	ws := t.workerFor(r.Worker)
	if t.cfg.TrackPrefillTokens {
		a.prefillTokens = t.uncached(a.isl, int64(r.CachedBlocks))
		ws.prefillTokens += a.prefillTokens
	}
	t.addBlocks(ws, a, r)
	ws.activeRequests++
	t.requests[r.ID] = a
	return nil
}

// addBlocks books the request's blocks on its worker, unless blocks are
// not tracked. Callers hold the lock.
func (t *Tracker) addBlocks(ws *workerState, a *active, r Request) {
	if !t.cfg.TrackActiveBlocks {
		return
	}
	total := ceilDiv(a.isl, t.blockSize)
	if t.cfg.AssumeKVReuse {
		a.hashes = append(a.hashes, r.Hashes...)
		a.decodeBlocks = total - int64(len(r.Hashes))
		ws.decodeBlocks += ws.addShared(a.hashes)
	} else {
		a.decodeBlocks = total
	}
	if t.cfg.TrackOutputBlocks {
		a.expectedTokens = int64(r.OutputTokens)
		a.expectedOut = t.outputBlocks(a.isl, a.expectedTokens)
		a.outMilli = t.outputMilli(a)
		ws.outMilli += a.outMilli
	}
	ws.decodeBlocks += a.decodeBlocks
}

// newActive returns a record for Add, recycled when one is free. Callers
// hold the lock.
func (t *Tracker) newActive() *active {
	if n := len(t.records); n > 0 {
		a := t.records[n-1]
		t.records = t.records[:n-1]
		return a
	}
	return &active{}
}

// recycle keeps a freed request's record for a later Add. Callers hold
// the lock, and a is no longer referenced.
func (t *Tracker) recycle(a *active) {
	if len(t.records) < maxFreeRecords && cap(a.hashes) <= maxFreeHashes {
		t.records = append(t.records, a)
	}
}

// checkRequest validates a request before any state changes.
func (t *Tracker) checkRequest(r Request) error {
	switch {
	case r.ID == "":
		return fmt.Errorf("%w: empty id", ErrInvalidRequest)
	case r.CachedBlocks < 0:
		return fmt.Errorf("%w: %q: cached blocks %d < 0", ErrInvalidRequest, r.ID, r.CachedBlocks)
	case r.OutputTokens < 0:
		return fmt.Errorf("%w: %q: output tokens %d < 0", ErrInvalidRequest, r.ID, r.OutputTokens)
	}
	return t.checkPrompt(r.Hashes, r.ISLTokens)
}

// checkPrompt validates a prompt's hashes against its length.
func (t *Tracker) checkPrompt(hashes []routing.SeqHash, isl int) error {
	if isl < 0 {
		return fmt.Errorf("%w: isl %d < 0", ErrInvalidRequest, isl)
	}
	if int64(len(hashes)) > int64(isl)/t.blockSize {
		return fmt.Errorf("%w: %d hashed blocks exceed isl %d at block size %d",
			ErrInvalidRequest, len(hashes), isl, t.blockSize)
	}
	return nil
}

// workerFor returns the state of w, creating it. Callers hold the lock.
func (t *Tracker) workerFor(w routing.Worker) *workerState {
	ws := t.workers[w]
	if ws == nil {
		if n := len(t.spares); n > 0 {
			ws, t.spares[n-1] = t.spares[n-1], nil
			t.spares = t.spares[:n-1]
		} else {
			ws = &workerState{}
		}
		t.workers[w] = ws
	}
	return ws
}

// uncached is the prompt tokens not covered by a device-cached prefix.
func (t *Tracker) uncached(isl, cachedBlocks int64) int64 {
	return max(0, isl-cachedBlocks*t.blockSize)
}

// PrefillComplete records the request's first output token: its uncached
// tokens stop counting as prefill load. Repeated calls are harmless.
func (t *Tracker) PrefillComplete(id string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.requests[id]
	if a == nil {
		return fmt.Errorf("%w: %q", ErrUnknownRequest, id)
	}
	t.completePrefill(a)
	return nil
}

// completePrefill drops a request's prefill load. Callers hold the lock.
func (t *Tracker) completePrefill(a *active) {
	t.workers[a.worker].prefillTokens -= a.prefillTokens
	a.prefillTokens = 0
}

// Free releases a request's load. It reports whether the request was
// active; freeing an unknown or already freed id does nothing.
func (t *Tracker) Free(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.free(id)
}

// free releases a request. Callers hold the lock.
func (t *Tracker) free(id string) bool {
	a := t.requests[id]
	if a == nil {
		return false
	}
	delete(t.requests, id)
	ws := t.workers[a.worker]
	ws.prefillTokens -= a.prefillTokens
	ws.decodeBlocks -= a.decodeBlocks
	ws.outMilli -= a.outMilli
	if len(a.hashes) > 0 {
		ws.decodeBlocks -= ws.removeShared(a.hashes)
	}
	ws.activeRequests--
	if ws.activeRequests == 0 {
		delete(t.workers, a.worker)
		// Every block a request added was released by its own Free, so
		// an idle worker's map is empty; the length check keeps that an
		// observation rather than an assumption.
		if len(t.spares) < maxSpares {
			refs := ws.refs
			if refs != nil && (refs.len() != 0 || refs.peak > maxSpareRefs) {
				refs = nil
			}
			*ws = workerState{refs: refs}
			t.spares = append(t.spares, ws)
		}
	}
	t.recycle(a)
	return true
}

// RemoveWorker frees every active request of a worker that left the fleet
// and returns how many there were.
func (t *Tracker) RemoveWorker(w routing.Worker) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for id, a := range t.requests {
		if a.worker == w && t.free(id) {
			n++
		}
	}
	return n
}

// Active returns the current load of a worker, without any new request.
func (t *Tracker) Active(w routing.Worker) routing.Load {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.workers[w].load()
}

// Len returns the number of active requests on all workers.
func (t *Tracker) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.requests)
}

// ceilDiv divides rounding up; b is positive and a non-negative.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
