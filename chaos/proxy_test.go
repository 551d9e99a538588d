package chaos

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// proxy is a TCP proxy for one link (a WAN link between two DCs): it
// forwards every connection to its target with an added one-way delay, and
// can be cut (every open connection is closed and new ones are refused by
// closing them at once) and restored.
type proxy struct {
	ln     net.Listener
	target string
	delay  time.Duration

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// startProxy listens on a loopback port and forwards to target.
func startProxy(t *testing.T, target string, delay time.Duration) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, delay: delay, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's listen address.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *proxy) serve(c net.Conn) {
	defer p.forget(c)
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = up.Close()
		return
	}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	defer p.forget(up)
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(up, c) })
	wg.Go(func() { p.pipe(c, up) })
	wg.Wait()
}

// pipe copies src to dst, holding each chunk for the link's delay.
func (p *proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.delay > 0 {
				time.Sleep(p.delay)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) forget(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Cut closes every open connection of the link and refuses new ones.
func (p *proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
}

// Restore lets connections through again.
func (p *proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

// TestProxyCutAndRestore checks the link proxy itself: data flows with the
// delay, a cut breaks open connections and refuses new ones, and a restore
// lets new connections through.
func TestProxyCutAndRestore(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	p := startProxy(t, echo.Addr().String(), 10*time.Millisecond)
	roundTrip := func() error {
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		b := make([]byte, 4)
		_, err = io.ReadFull(c, b)
		return err
	}
	start := time.Now()
	if err := roundTrip(); err != nil {
		t.Fatalf("through the link: %v", err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("round trip took %v, below two one-way delays", d)
	}
	p.Cut()
	if err := roundTrip(); err == nil {
		t.Fatal("a cut link carried data")
	}
	p.Restore()
	if err := roundTrip(); err != nil {
		t.Fatalf("after restore: %v", err)
	}
}
