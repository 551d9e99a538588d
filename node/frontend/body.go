package frontend

import (
	"errors"
	"io"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// Body buffers come from one pool per power-of-two size class, from 4 KiB
// to 2 MiB. A 12k-token pre-tokenized prompt is a 77 KB body; reading each
// into a fresh buffer made the bodies most of the node's garbage, and at a
// thousand requests a second the collector then ran dozens of times a
// second on the request path. Bodies over the largest class are rare and
// are left to the collector rather than pinned in a pool.
const (
	minBodyClass = 12
	maxBodyClass = 21
)

var bodyPools [maxBodyClass - minBodyClass + 1]sync.Pool

// errBodyReleased reports a read of a body whose buffer went back to the
// pool: a bug in the body's owners, answered with an error rather than
// with another request's bytes.
var errBodyReleased = errors.New("request body already released")

// body is one request body, in a buffer shared by the exchange and the
// readers lent to the engine transport. The transport may read and close
// a request body after RoundTrip returned (net/http allows it), so the
// buffer is reference-counted: the exchange holds one reference until it
// finishes, every reader one until it is closed, and the buffer returns to
// its pool when the last is let go.
type body struct {
	data []byte
	refs atomic.Int32
	// hold is the body's share of the node's body budget, given back
	// with the last reference.
	hold oaiedge.BodyHold
}

// getBody returns a body of n bytes (contents undefined) holding one
// reference.
func getBody(n int) *body {
	c := sizeClass(n)
	var b *body
	if c <= maxBodyClass {
		b, _ = bodyPools[c-minBodyClass].Get().(*body)
	}
	if b == nil {
		b = &body{data: make([]byte, 0, max(n, 1<<min(c, maxBodyClass)))}
	}
	b.data = b.data[:n]
	b.refs.Store(1)
	return b
}

// wrapBody makes a body of data, which was not pooled, holding one
// reference. Its buffer joins a pool when released, if it fits one.
func wrapBody(data []byte) *body {
	b := &body{data: data}
	b.refs.Store(1)
	return b
}

// sizeClass is the smallest class whose buffers hold n bytes.
func sizeClass(n int) int {
	if n <= 1<<minBodyClass {
		return minBodyClass
	}
	return bits.Len(uint(n - 1))
}

// retain takes another reference unless the body was already released.
func (b *body) retain() bool {
	for {
		n := b.refs.Load()
		if n <= 0 {
			return false
		}
		if b.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference; the last one returns the buffer to the pool
// of the largest class it fills.
func (b *body) release() {
	if b == nil || b.refs.Add(-1) != 0 {
		return
	}
	b.hold.Release()
	c := bits.Len(uint(cap(b.data))) - 1
	if c < minBodyClass || c > maxBodyClass {
		return
	}
	b.data = b.data[:0]
	bodyPools[c-minBodyClass].Put(b)
}

// reader returns a new reader of the whole body, holding a reference
// until it is closed.
func (b *body) reader() (io.ReadCloser, error) {
	if !b.retain() {
		return nil, errBodyReleased
	}
	return &bodyReader{b: b}, nil
}

// bodyReader reads a body. Close may come from another goroutine than
// Read, so both take mu, and a Read after Close fails instead of touching
// a buffer that may already serve another request.
type bodyReader struct {
	mu  sync.Mutex
	b   *body
	off int
}

// Read implements io.Reader.
func (r *bodyReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.b == nil {
		return 0, errBodyReleased
	}
	if r.off >= len(r.b.data) {
		return 0, io.EOF
	}
	n := copy(p, r.b.data[r.off:])
	r.off += n
	return n, nil
}

// writeTo writes at most limit unread bytes to w in one call, without
// copying them. It holds a reference of its own during the write, so that
// a Close meanwhile cannot hand the buffer to another request.
func (r *bodyReader) writeTo(w io.Writer, limit int64) (int64, error) {
	r.mu.Lock()
	b := r.b
	if b == nil || !b.retain() {
		r.mu.Unlock()
		return 0, errBodyReleased
	}
	data := b.data[min(r.off, len(b.data)):]
	data = data[:min(int64(len(data)), max(limit, 0))]
	r.off += len(data)
	r.mu.Unlock()
	defer b.release()
	n, err := w.Write(data)
	if n < len(data) {
		r.mu.Lock()
		r.off -= len(data) - n
		r.mu.Unlock()
	}
	return int64(n), err
}

// Close releases the reader's reference; later calls do nothing.
func (r *bodyReader) Close() error {
	r.mu.Lock()
	b := r.b
	r.b = nil
	r.mu.Unlock()
	b.release()
	return nil
}
