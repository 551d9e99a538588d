package load

import (
	"fmt"

	"github.com/kvrouter/kvrouter/routing"
)

// Query is a request being routed, as the projection needs it.
type Query struct {
	// Hashes are the chained sequence hashes of the prompt's complete
	// blocks, as for Request.Hashes.
	Hashes []routing.SeqHash
	// ISLTokens is the prompt length in tokens.
	ISLTokens int
	// OutputTokens is the expected output length, as for
	// Request.OutputTokens.
	OutputTokens int
}

// Potential appends to dst, for each match, the load its worker would carry
// if it took the request q, and returns the extended slice. The fields are:
//   - PrefillTokens: active prefill tokens plus the request's uncached
//     tokens, max(0, ISL - match.Device*BlockSize). It includes the request.
//     With TrackPrefillTokens off it is the request's uncached tokens only.
//   - DecodeBlocks: active decode blocks plus the request's blocks that are
//     not already active on that worker (all ceil(ISL/BlockSize) of them
//     when KV reuse is not assumed), and with TrackOutputBlocks the blocks
//     of its expected output. It includes the request. With
//     TrackActiveBlocks off it is zero.
//   - ActiveRequests: the worker's active requests. It does not include the
//     request.
//
// Only match.Device is read from the overlap. Workers the tracker has never
// seen are idle. Potential allocates only when dst lacks capacity.
func (t *Tracker) Potential(dst []routing.Load, q Query, matches []routing.Match) ([]routing.Load, error) {
	if err := t.checkPrompt(q.Hashes, q.ISLTokens); err != nil {
		return dst, err
	}
	isl := int64(q.ISLTokens)
	total := ceilDiv(isl, t.blockSize)
	if t.cfg.TrackOutputBlocks && q.OutputTokens > 0 {
		total += t.outputBlocks(isl, int64(q.OutputTokens))
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, m := range matches {
		if m.Device < 0 {
			return dst, fmt.Errorf("%w: worker %v: device overlap %d < 0", ErrInvalidRequest, m.Worker, m.Device)
		}
		ws := t.workers[m.Worker]
		l := ws.load()
		l.PrefillTokens += t.uncached(isl, int64(m.Device))
		if t.cfg.TrackActiveBlocks {
			l.DecodeBlocks += total
		}
		if t.cfg.TrackActiveBlocks && t.cfg.AssumeKVReuse {
			l.DecodeBlocks -= ws.activePrefix(q.Hashes)
		}
		dst = append(dst, l)
	}
	return dst, nil
}
