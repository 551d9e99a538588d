package oaiedge

import "sync"

// maxPooledTokens bounds the scratch buffers kept for reuse: a buffer
// that grew for an exceptionally long prompt is left to the collector
// rather than pinned in the pool. 256Ki ids (1 MiB) covers the prompts
// that make up the steady load.
const maxPooledTokens = 256 << 10

// scratchPool recycles the token id buffers of ParsePooled. A
// pre-tokenized 12k prompt is 48 KiB of ids; allocating (and zeroing)
// that for every request would put the collector on the request path at
// a thousand requests a second, at both edges.
var scratchPool = sync.Pool{New: func() any { return new([]uint32) }}

// ParsePooled is Parse with the first token id array of the body parsed
// into a scratch buffer from a pool the package keeps, so that a long
// pre-tokenized prompt is parsed without allocating. The caller calls Release once it no longer reads Tokens;
// on a refusal the buffer is back in the pool already.
func ParsePooled(body []byte, ep Endpoint, o Options) (*Request, error) {
	buf := scratchPool.Get().(*[]uint32)
	r, err := parse(body, ep, o, (*buf)[:0], true)
	if err != nil {
		putScratch(buf, nil)
		return nil, err
	}
	r.pooled = buf
	return &r, nil
}

// Release gives the scratch buffer of ParsePooled back, keeping the
// larger buffer when the parse outgrew it; Tokens must no longer be used.
// It does nothing on a nil Request, a Request of Parse,
// and after the first call.
func (r *Request) Release() {
	if r == nil || r.pooled == nil {
		return
	}
	putScratch(r.pooled, r.scratch)
	r.pooled, r.scratch, r.Tokens = nil, nil, nil
}

// putScratch returns buf to the pool, or grown when the parse outgrew
// buf.
func putScratch(buf *[]uint32, grown []uint32) {
	if cap(grown) > cap(*buf) {
		*buf = grown
	}
	if cap(*buf) > maxPooledTokens {
		return
	}
	*buf = (*buf)[:0]
	scratchPool.Put(buf)
}
