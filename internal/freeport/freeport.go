package freeport

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
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

// reservation is how long a port Loopback handed out stays reserved for
// the process that asked: longer than any test takes from picking a
// cluster's addresses to its last restart on them.
const reservation = 15 * time.Minute

// handedOut holds every port this process was given, never given again.
var handedOut sync.Map

// Loopback returns a free loopback address below the ephemeral range.
func Loopback() (string, error) {
	hi := ephemeralLow()
	if hi <= lowestPort {
		return anyPort()
	}
	for range attempts {
		port := lowestPort + rand.IntN(hi-lowestPort)
		if _, taken := handedOut.LoadOrStore(port, true); taken {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		_ = ln.Close()
		if !reserve(port, time.Now()) {
			continue
		}
		return addr, nil
	}
	return "", fmt.Errorf("%w: %d attempts in [%d, %d)", ErrNoPort, attempts, lowestPort, hi)
}

// reserveDir holds one file per reserved port, shared by the processes
// of one user (test binaries of several packages run at once).
func reserveDir() string {
	return filepath.Join(os.TempDir(), "kvrouter-freeport-"+strconv.Itoa(os.Getuid()))
}

// reserve claims port for this process across processes: a file created
// exclusively, which other processes respect until it is older than
// reservation. A port is free when it is picked, but the process that
// picked it may bind it only seconds later (a cluster's addresses are
// chosen before its members start, a child process must start first);
// without the claim another process could pick it in between. Without a
// usable directory the claim is skipped, as before it existed.
func reserve(port int, now time.Time) bool {
	dir := reserveDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return true
	}
	path := filepath.Join(dir, strconv.Itoa(port))
	for range 2 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			_ = f.Close()
			return true
		}
		if !errors.Is(err, fs.ErrExist) {
			return true
		}
		fi, err := os.Stat(path)
		if err != nil || now.Sub(fi.ModTime()) < reservation {
			return false
		}
		// A stale claim: remove it and try once more to create it, so
		// that of two processes doing this at once only one succeeds.
		_ = os.Remove(path)
	}
	return false
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
