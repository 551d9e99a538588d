package freeport

import (
	"net"
	"strconv"
	"testing"
	"time"
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

// TestLoopbackNeverRepeatsAPort: the ports of one process are all
// different, even where the random choice would repeat one.
func TestLoopbackNeverRepeatsAPort(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		addr, err := Loopback()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
	}
}

// TestReserveExcludesOtherClaimsUntilTheyAreStale: a port claimed by
// another process is refused while its claim is fresh and taken over once
// it is older than the reservation.
func TestReserveExcludesOtherClaimsUntilTheyAreStale(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	now := time.Now()
	const port = 12345
	if !reserve(port, now) {
		t.Fatal("a free port was not reserved")
	}
	if reserve(port, now.Add(time.Minute)) {
		t.Fatal("a freshly claimed port was reserved again")
	}
	if !reserve(port, now.Add(reservation+time.Minute)) {
		t.Fatal("a stale claim was not taken over")
	}
}
