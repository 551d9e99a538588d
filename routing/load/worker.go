package load

import "github.com/kvrouter/kvrouter/routing"

// workerState is the aggregate load of one worker. It exists only while the
// worker has at least one active request.
type workerState struct {
	prefillTokens  int64
	decodeBlocks   int64
	activeRequests int64
	// outMilli is the weight of the active requests' output blocks, in
	// thousandths of a block: with an expected output length their weight
	// decays (output.go), and integer thousandths keep the sum exact, so
	// that it returns to zero when the last request is freed.
	outMilli int64
	// refs counts, per prompt block hash, the active requests of this worker
	// that hold the block. It is only filled when KV reuse is assumed; a
	// block adds to decodeBlocks when its count goes from zero to one.
	refs *refTable
}

// addShared books the shared prompt blocks of a request and returns how many
// of them were not yet active on the worker.
func (w *workerState) addShared(hashes []routing.SeqHash) int64 {
	if len(hashes) == 0 {
		return 0
	}
	if w.refs == nil {
		w.refs = newRefTable(len(hashes))
	}
	var fresh int64
	for _, h := range hashes {
		if w.refs.inc(h) {
			fresh++
		}
	}
	return fresh
}

// removeShared releases the shared prompt blocks of a request and returns
// how many of them are no longer held by any active request.
func (w *workerState) removeShared(hashes []routing.SeqHash) int64 {
	if w.refs == nil {
		return 0
	}
	var gone int64
	for _, h := range hashes {
		if w.refs.dec(h) {
			gone++
		}
	}
	return gone
}

// activePrefix returns how many leading hashes are active on the worker.
// Chained sequence hashes name their whole prefix, and every active request
// holds all the blocks of its own prefix, so the active hashes of a request
// form a prefix of its hash list and a binary search finds its length. If a
// caller breaks the chaining contract the result is still within
// [0, len(hashes)], so a projection is never below the active load.
func (w *workerState) activePrefix(hashes []routing.SeqHash) int64 {
	if w == nil || w.refs == nil || w.refs.len() == 0 {
		return 0
	}
	lo, hi := 0, len(hashes)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if w.refs.count(hashes[mid]) > 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return int64(lo)
}

// load returns the worker's active load; a nil state is an idle worker.
func (w *workerState) load() routing.Load {
	if w == nil {
		return routing.Load{}
	}
	return routing.Load{
		PrefillTokens:  w.prefillTokens,
		DecodeBlocks:   w.decodeBlocks + (w.outMilli+milli/2)/milli,
		ActiveRequests: w.activeRequests,
	}
}
