package frontend

import "sync"

// maxPooledTokens bounds the token buffers kept for reuse: a buffer that
// grew for an exceptionally long prompt is left to the garbage collector
// rather than pinned in the pool. 256Ki ids (1 MiB) covers the prompts
// that make up the steady load.
const maxPooledTokens = 256 << 10

// tokenBuffers recycles the token id slices of parsed prompts. A
// pre-tokenized 12k prompt is 48 KiB of ids; allocating (and zeroing) that
// for every request would put the garbage collector on the request path
// at a thousand requests a second.
var tokenBuffers = sync.Pool{New: func() any { return new([]uint32) }}

// getTokens returns an empty token buffer from the pool.
func getTokens() *[]uint32 {
	return tokenBuffers.Get().(*[]uint32)
}

// putTokens returns buf, as the parse left it, to the pool. The caller
// must hold no reference into it any more.
func putTokens(buf *[]uint32, used []uint32) {
	if buf == nil {
		return
	}
	if cap(used) > cap(*buf) {
		*buf = used // the parse outgrew the buffer: keep the bigger one
	}
	if cap(*buf) > maxPooledTokens {
		return
	}
	*buf = (*buf)[:0]
	tokenBuffers.Put(buf)
}
