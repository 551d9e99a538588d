package netem

import (
	"io"
	"net"
	"testing"
	"time"
)

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
	p, err := Listen(echo.Addr().String(), 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
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
