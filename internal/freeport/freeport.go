package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

const (
	// lowestPort is the bottom of the range Loopback picks from: above
	// the well-known and most registered service ports.
	lowestPort = 10000
	// defaultEphemeralLow is Linux's default start of the ephemeral
	// range, used where the range cannot be read.
	defaultEphemeralLow = 32768
	// attempts bounds the ports tried before giving up.
	attempts = 100
)

// ErrNoPort is returned when no port of the range could be bound.
var ErrNoPort = errors.New("freeport: no free loopback port below the ephemeral range")

// Loopback returns a free loopback address below the ephemeral range.
func Loopback() (string, error) {
	hi := ephemeralLow()
	if hi <= lowestPort {
		return anyPort()
	}
	for range attempts {
		port := lowestPort + rand.IntN(hi-lowestPort)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		_ = ln.Close()
		return addr, nil
	}
	return "", fmt.Errorf("%w: %d attempts in [%d, %d)", ErrNoPort, attempts, lowestPort, hi)
}

// anyPort is Loopback where the ephemeral range leaves no room below it.
func anyPort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// ephemeralLow returns the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return defaultEphemeralLow
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return defaultEphemeralLow
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil || low <= 0 {
		return defaultEphemeralLow
	}
	return low
}
