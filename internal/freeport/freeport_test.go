package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestLoopbackIsBelowTheEphemeralRangeAndBindable(t *testing.T) {
	hi := ephemeralLow()
	for range 20 {
		addr, err := Loopback()
		if err != nil {
			t.Fatal(err)
		}
		host, p, err := net.SplitHostPort(addr)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("address %q", addr)
		}
		port, _ := strconv.Atoi(p)
		if hi > lowestPort && (port < lowestPort || port >= hi) {
			t.Fatalf("port %d outside [%d, %d)", port, lowestPort, hi)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("returned address %s cannot be bound: %v", addr, err)
		}
		_ = ln.Close()
	}
}
