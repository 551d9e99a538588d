package consumer

import (
	"net"
	"sync"
	"time"
)

// delayConn delays every write by a fixed one-way latency while keeping
// order and throughput, like a long link: writes are copied and handed to
// a goroutine that sends each when its time comes.
type delayConn struct {
	net.Conn
	delay time.Duration
	q     chan delayed
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// delayed is one write waiting for its delivery time.
type delayed struct {
	at   time.Time
	data []byte
}

// newDelayConn wraps c; Close stops the sender and closes c.
func newDelayConn(c net.Conn, delay time.Duration) *delayConn {
	d := &delayConn{Conn: c, delay: delay, q: make(chan delayed, 4096), done: make(chan struct{})}
	d.wg.Go(d.send)
	return d
}

// Write queues a copy of p for delivery after the delay.
func (d *delayConn) Write(p []byte) (int, error) {
	select {
	case d.q <- delayed{at: time.Now().Add(d.delay), data: append([]byte(nil), p...)}:
		return len(p), nil
	case <-d.done:
		return 0, net.ErrClosed
	}
}

// send delivers queued writes at their times.
func (d *delayConn) send() {
	for {
		select {
		case <-d.done:
			return
		case w := <-d.q:
			if wait := time.Until(w.at); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-d.done:
					t.Stop()
					return
				}
			}
			if _, err := d.Conn.Write(w.data); err != nil {
				return
			}
		}
	}
}

// Close stops the sender and closes the connection.
func (d *delayConn) Close() error {
	d.once.Do(func() { close(d.done) })
	err := d.Conn.Close()
	d.wg.Wait()
	return err
}

// delayListener wraps accepted connections in delayConn.
type delayListener struct {
	net.Listener
	delay time.Duration
}

// Accept wraps the next connection.
func (l delayListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newDelayConn(c, l.delay), nil
}
