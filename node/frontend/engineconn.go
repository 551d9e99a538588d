package frontend

import (
	"context"
	"io"
	"net"
)

// engineConn is a connection to an engine that sends a pooled request
// body straight from its buffer. net/http hands a request body to the
// connection wrapped in an io.LimitedReader, which hides every fast path,
// so a TCP connection would copy it through a fresh 32 KiB buffer per
// request: garbage at the rate of the request bodies, and one more copy of
// each. Every other reader goes to the TCP connection as before.
type engineConn struct {
	net.Conn
}

// ReadFrom implements io.ReaderFrom.
func (c engineConn) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if br, ok := lr.R.(*bodyReader); ok {
			n, err := br.writeTo(c.Conn, lr.N)
			lr.N -= n
			return n, err
		}
	}
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// dialEngine wraps dial's connections in engineConn.
func dialEngine(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return engineConn{c}, nil
	}
}
