package frontend

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// engineTransport is the engine client for plain-HTTP engines: HTTP/1.1
// over kept-alive TCP connections, one exchange at a time per connection,
// run entirely on the calling goroutine.
//
// Why not net/http's Transport: it runs every connection with a read loop
// and a write loop goroutine and hands the request, the response and the
// end of the body between them and the caller over channels. On a node
// with few cores each handoff is a scheduler wake-up, several per request,
// and together they were the largest part of the latency the node adds to
// a request (docs/benchmarks.md). Here the caller writes the request head
// and the pooled body in one vectored write, reads the response head with
// net/http's own parser (http.ReadResponse, which also handles chunked
// and close-delimited bodies) and returns the connection to the pool when
// it reads the body's end. Context cancellation costs no goroutine either:
// context.AfterFunc expires the connection's deadline, which fails the
// blocked read or write at once.
//
// What it gives up, deliberately: HTTP/2, TLS (https engines go to the
// fallback net/http Transport), proxies, compression, 100-continue and
// noticing in the background that an engine closed an idle connection.
// For the last, a request that fails on a reused connection before a
// single response byte arrives is retried once, as net/http does, when
// the body can be replayed (GetBody): on a newly dialled connection, after
// dropping the engine's other idle ones, which an engine that closed one
// (a keep-alive timeout, a restart) has most likely closed too, since the
// pool hands out the most recently used first.
type engineTransport struct {
	dial          func(ctx context.Context, network, addr string) (net.Conn, error)
	headerTimeout time.Duration
	idleTimeout   time.Duration
	now           func() time.Time
	fallback      *http.Transport

	mu   sync.Mutex
	idle map[string][]*engineConnState
}

// maxIdlePerEngine bounds the idle connections kept per engine address:
// enough for the requests in flight to one engine at a busy node's rate.
const maxIdlePerEngine = 256

// engineIdleTimeout is how long an idle engine connection stays in the
// pool: just under the 5 s keep-alive timeout of uvicorn, which serves
// vLLM's and SGLang's OpenAI APIs, so that the pool seldom hands out a
// connection the engine has already closed (which costs a retry).
const engineIdleTimeout = 4 * time.Second

// engineReadBuffer is the response read buffer: a large non-streamed
// answer arrives in few reads.
const engineReadBuffer = 64 << 10

// aLongTimeAgo is the deadline that fails a connection's blocked calls.
var aLongTimeAgo = time.Unix(1, 0)

// errEngineHeader reports a request header that cannot be sent.
var errEngineHeader = errors.New("invalid engine request header")

// newEngineTransport builds the engine client from the upstream timeouts.
func newEngineTransport(cfg Config) *engineTransport {
	dialer := &net.Dialer{Timeout: cfg.UpstreamDialTimeout, KeepAlive: 30 * time.Second}
	return &engineTransport{
		dial:          dialer.DialContext,
		headerTimeout: cfg.UpstreamHeaderTimeout,
		idleTimeout:   min(cfg.IdleTimeout, engineIdleTimeout),
		now:           cfg.Now,
		fallback:      newTransport(cfg),
		idle:          map[string][]*engineConnState{},
	}
}

// RoundTrip implements http.RoundTripper. Requests the client cannot
// carry (https, a body of unknown length) go to the fallback transport.
func (t *engineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" || (req.ContentLength <= 0 && req.Body != nil && req.Body != http.NoBody) {
		return t.fallback.RoundTrip(req)
	}
	resp, retry, err := t.exchange(req, req.Body, false)
	if err == nil || !retry || req.GetBody == nil || req.Context().Err() != nil {
		return resp, err
	}
	t.dropIdle(req.URL.Host)
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	resp, _, err = t.exchange(req, body, true)
	return resp, err
}

// exchange sends req with body on one connection, a newly dialled one
// when fresh is set. retry reports a failure on a reused connection before
// any response byte, which a fresh connection may not repeat. body is
// closed on every path.
func (t *engineTransport) exchange(req *http.Request, body io.ReadCloser, fresh bool) (_ *http.Response, retry bool, err error) {
	pc, err := t.get(req.Context(), req.URL.Host, fresh)
	if err != nil {
		closeBody(body)
		return nil, false, err
	}
	resp, err := pc.roundTrip(req, body)
	if err != nil {
		retry = pc.reused && pc.nread == 0 && isStaleConnError(err)
		pc.conn.Close()
		return nil, retry, err
	}
	return resp, false, nil
}

// closeBody closes a request body that may be nil.
func closeBody(b io.ReadCloser) {
	if b != nil {
		_ = b.Close()
	}
}

// isStaleConnError reports the errors of an engine that closed a kept-alive
// connection while it sat idle.
func isStaleConnError(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// get returns an idle connection to addr, or dials one (always when
// fresh is set).
func (t *engineTransport) get(ctx context.Context, addr string, fresh bool) (*engineConnState, error) {
	if !fresh {
		if pc := t.takeIdle(addr); pc != nil {
			return pc, nil
		}
	}
	c, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	pc := &engineConnState{t: t, addr: addr, conn: c}
	pc.br = bufio.NewReaderSize(pc, engineReadBuffer)
	return pc, nil
}

// takeIdle pops the most recently used idle connection to addr that has
// not idled past idleTimeout, closing the expired ones it meets.
func (t *engineTransport) takeIdle(addr string) *engineConnState {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	list := t.idle[addr]
	for len(list) > 0 {
		pc := list[len(list)-1]
		list[len(list)-1] = nil
		list = list[:len(list)-1]
		if t.idleTimeout > 0 && now.Sub(pc.idleSince) > t.idleTimeout {
			pc.conn.Close()
			continue
		}
		t.idle[addr] = list
		pc.reused, pc.nread = true, 0
		return pc
	}
	delete(t.idle, addr)
	return nil
}

// dropIdle closes every idle connection to addr.
func (t *engineTransport) dropIdle(addr string) {
	t.mu.Lock()
	list := t.idle[addr]
	delete(t.idle, addr)
	t.mu.Unlock()
	for _, pc := range list {
		pc.conn.Close()
	}
}

// put returns a connection whose exchange ended cleanly to the pool.
func (t *engineTransport) put(pc *engineConnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.idle[pc.addr]) >= maxIdlePerEngine {
		pc.conn.Close()
		return
	}
	pc.idleSince = t.now()
	t.idle[pc.addr] = append(t.idle[pc.addr], pc)
}

// CloseIdleConnections closes every idle connection; connections in use
// close when their exchange ends.
func (t *engineTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = map[string][]*engineConnState{}
	t.mu.Unlock()
	for _, list := range idle {
		for _, pc := range list {
			pc.conn.Close()
		}
	}
	t.fallback.CloseIdleConnections()
}

// engineConnState is one engine connection and its read buffer.
type engineConnState struct {
	t         *engineTransport
	addr      string
	conn      net.Conn
	br        *bufio.Reader
	head      []byte
	idleSince time.Time
	reused    bool
	// nread counts the bytes read in the current exchange.
	nread int
}

// Read feeds the connection's buffered reader and counts what it reads.
func (pc *engineConnState) Read(p []byte) (int, error) {
	n, err := pc.conn.Read(p)
	pc.nread += n
	return n, err
}

// roundTrip writes req and reads the response head. The returned body
// gives the connection back to the pool when read to its end.
func (pc *engineConnState) roundTrip(req *http.Request, body io.ReadCloser) (*http.Response, error) {
	stop := context.AfterFunc(req.Context(), func() { _ = pc.conn.SetDeadline(aLongTimeAgo) })
	resp, err := pc.send(req, body)
	if err != nil {
		stop()
		if cerr := req.Context().Err(); cerr != nil {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return nil, err
	}
	resp.Body = &engineBody{pc: pc, rc: resp.Body, stop: stop, reuse: !resp.Close && !req.Close}
	return resp, nil
}

// send writes the request and reads the response head under the header
// timeout.
func (pc *engineConnState) send(req *http.Request, body io.ReadCloser) (*http.Response, error) {
	err := pc.writeRequest(req, body)
	closeBody(body)
	if err != nil {
		return nil, err
	}
	if d := pc.t.headerTimeout; d > 0 {
		// Socket deadlines are on the wall clock whatever Config.Now is,
		// which only ages idle connections.
		_ = pc.conn.SetReadDeadline(time.Now().Add(d))
	}
	resp, err := readFinalResponse(pc.br, req)
	if err != nil {
		return nil, err
	}
	if pc.t.headerTimeout > 0 {
		_ = pc.conn.SetReadDeadline(time.Time{})
	}
	return resp, nil
}

// readFinalResponse reads response heads until a final (non-1xx) one.
func readFinalResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
	}
}

// writeRequest writes the request head and body. A pooled body goes out
// with the head in one vectored write, straight from its buffer.
func (pc *engineConnState) writeRequest(req *http.Request, body io.ReadCloser) error {
	head, err := appendRequestHead(pc.head[:0], req)
	if err != nil {
		return err
	}
	pc.head = head
	n := max(req.ContentLength, 0)
	if br, ok := body.(*bodyReader); ok && n > 0 {
		written, err := br.writeTo(headWriter{pc.conn, head}, n)
		if err == nil && written != n {
			err = fmt.Errorf("engine request body: wrote %d of %d bytes", written, n)
		}
		return err
	}
	if _, err := pc.conn.Write(head); err != nil || n == 0 {
		return err
	}
	written, err := io.CopyN(pc.conn, body, n)
	if err == nil && written != n {
		err = fmt.Errorf("engine request body: wrote %d of %d bytes", written, n)
	}
	return err
}

// headWriter writes a request head before each buffer in one writev.
type headWriter struct {
	conn net.Conn
	head []byte
}

// Write implements io.Writer, counting only p's bytes.
func (w headWriter) Write(p []byte) (int, error) {
	bufs := net.Buffers{w.head, p}
	n, err := bufs.WriteTo(w.conn)
	return max(int(n)-len(w.head), 0), err
}

// appendRequestHead appends req's HTTP/1.1 request line and headers.
func appendRequestHead(b []byte, req *http.Request) ([]byte, error) {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	b = append(b, req.Method...)
	b = append(b, ' ')
	b = append(b, req.URL.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nUser-Agent: kvrouter\r\nContent-Length: "...)
	b = strconv.AppendInt(b, max(req.ContentLength, 0), 10)
	b = append(b, "\r\n"...)
	if req.Close {
		b = append(b, "Connection: close\r\n"...)
	}
	for k, vs := range req.Header {
		for _, v := range vs {
			if strings.ContainsAny(k, "\r\n: ") || strings.ContainsAny(v, "\r\n") {
				return b, fmt.Errorf("%w: %q", errEngineHeader, k)
			}
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	return append(b, "\r\n"...), nil
}

// engineBody is a response body that hands its connection back to the
// pool at its end, or closes it when abandoned early.
type engineBody struct {
	pc    *engineConnState
	rc    io.ReadCloser
	stop  func() bool
	reuse bool
	done  bool
	err   error
}

// Read implements io.Reader.
func (b *engineBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	if err != nil {
		b.finish(err == io.EOF, err)
	}
	return n, err
}

// Close implements io.Closer. A body closed before its end closes the
// connection (its rest would have to be read first), and so does one
// whose context was cancelled: the deadline may already be expired.
func (b *engineBody) Close() error {
	if !b.done {
		b.finish(false, errors.New("read on closed engine response body"))
	}
	return nil
}

// finish ends the exchange once.
func (b *engineBody) finish(clean bool, err error) {
	b.done, b.err = true, err
	// stop reports false when the cancellation already fired (or is
	// running): the connection's deadline is then unusable.
	if b.stop() && clean && b.reuse {
		b.pc.t.put(b.pc)
		return
	}
	b.pc.conn.Close()
}
