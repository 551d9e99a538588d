package mocker

import (
	"cmp"
	"slices"

	"github.com/kvrouter/kvrouter/routing"
)

// Load is an engine's self-reported load, the payload of its periodic load
// report.
type Load struct {
	Worker routing.Worker
	// Waiting and Running count queued and scheduled requests.
	Waiting int
	Running int
	// KVUsedBlocks is the number of blocks held by running requests, each
	// physical block once (vLLM's KV usage); KVTotalBlocks the capacity.
	KVUsedBlocks  int
	KVTotalBlocks int
	// KVCachedBlocks is the number of blocks in the prefix cache, held or
	// not.
	KVCachedBlocks int
	// ActivePrefillTokens is the number of tokens still to prefill: the
	// uncomputed part of running prefills plus, for each waiting request,
	// its sequence minus the cached prefix that admission would skip now.
	// vLLM's scheduler skips that prefix at admission (it is never
	// computed), so counting the whole prompt would report work the engine
	// will not do, and more than a router books for the same request.
	ActivePrefillTokens int64
	// ActiveDecodeBlocks is the sum over running requests of the blocks
	// they hold, a block shared by two requests counting twice, which is
	// how the router's active-sequence tracker counts without KV reuse.
	ActiveDecodeBlocks int64
}

// Routing converts the report into the router's load vocabulary.
func (l Load) Routing() routing.Load {
	return routing.Load{
		PrefillTokens:  l.ActivePrefillTokens,
		DecodeBlocks:   l.ActiveDecodeBlocks,
		ActiveRequests: int64(l.Waiting + l.Running),
	}
}

// Load reports the engine's current load. It costs one pass over the
// waiting and running requests and, for each waiting request, a lookup of
// its cached prefix.
func (e *Engine) Load() Load {
	l := Load{
		Worker: e.worker, Waiting: e.waiting.len(), Running: len(e.running),
		KVUsedBlocks: e.cache.used(), KVTotalBlocks: e.cache.total,
		KVCachedBlocks: len(e.cache.byHash),
	}
	for _, s := range e.running {
		l.ActiveDecodeBlocks += int64(s.held)
		if pending := s.numTokens - s.computed; s.generated == 0 || pending > 1 {
			l.ActivePrefillTokens += int64(pending)
		}
	}
	e.waiting.each(func(s *seq) { l.ActivePrefillTokens += int64(e.uncachedTokens(s)) })
	// A request waiting for its transferred cache waits, as vLLM counts
	// one (WAITING_FOR_REMOTE_KVS).
	l.Waiting += len(e.transfers)
	for _, s := range e.transfers {
		l.ActivePrefillTokens += int64(e.uncachedTokens(s))
	}
	return l
}

// Snapshot is a full dump of an engine's prefix cache for a consumer that
// lost events: synthetic Stored events (id 0) that rebuild the cache
// contents, and the id of the last real event they reflect. A consumer
// resets the worker, applies Events and resumes at LastEventID+1.
type Snapshot struct {
	LastEventID uint64
	Events      []routing.Event
}

// Dump returns the current cache contents as a Snapshot. Blocks come in
// sequence-position order, so every parent precedes its children; each
// block is its own event, keyed to its parent.
func (e *Engine) Dump() Snapshot {
	blocks := make([]*block, 0, len(e.cache.byHash))
	for _, b := range e.cache.byHash {
		blocks = append(blocks, b)
	}
	slices.SortFunc(blocks, func(a, b *block) int {
		return cmp.Or(cmp.Compare(a.pos, b.pos), cmp.Compare(a.seq, b.seq))
	})
	evs := make([]routing.Event, 0, len(blocks))
	for _, b := range blocks {
		ev := routing.Event{
			Worker: e.worker, Kind: routing.EventStored, Tier: routing.TierDevice,
			Blocks: []routing.StoredBlock{{Engine: EngineHash(b.seq), Local: b.local}},
		}
		if b.pos > 0 {
			ev.Parent, ev.HasParent = EngineHash(b.parent), true
		}
		evs = append(evs, ev)
	}
	return Snapshot{LastEventID: e.log.lastID, Events: evs}
}

// uncachedTokens is what a waiting request would prefill if admitted now:
// its sequence minus the cached prefix, which admission caps so that one
// token is always computed.
func (e *Engine) uncachedTokens(s *seq) int {
	bs := e.cfg.BlockSize
	hits, _ := e.cache.prefix(s.seqs, (s.numTokens-1)/bs)
	have := hits * bs
	if s.remote {
		have = max(have, e.transferred(s))
	}
	return s.numTokens - have
}
