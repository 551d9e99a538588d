package secure

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
)

// ErrInsecure is returned by Check for a listener on a non-loopback
// address without TLS.
var ErrInsecure = errors.New("listener on a non-loopback address without TLS")

// InsecureFlag is the command-line override that lets exposed listeners
// run without TLS.
const InsecureFlag = "--insecure"

// Listener is one listening socket of a process, as configured.
type Listener struct {
	// Key is the configuration key of the address (raft_addr).
	Key string
	// Addr is the configured host:port.
	Addr string
	// TLS reports whether the listener is served over TLS.
	TLS bool
	// Enable names the flags that turn its TLS on.
	Enable string
}

// Loopback reports whether addr (host:port, or a bare host) binds to the
// loopback interface only.
func Loopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}

// Check returns ErrInsecure naming every listener of ls that is exposed
// (not loopback) without TLS, unless insecure is set; then it logs one
// warning per such listener on log (which may be nil) and returns nil.
func Check(ls []Listener, insecure bool, log *slog.Logger) error {
	var bad []string
	for _, l := range ls {
		if l.Addr == "" || l.TLS || Loopback(l.Addr) {
			continue
		}
		if insecure {
			if log != nil {
				log.Warn("listener exposed without TLS (--insecure)", "listener", l.Key, "addr", l.Addr)
			}
			continue
		}
		bad = append(bad, fmt.Sprintf("%s %s: set %s", l.Key, l.Addr, l.Enable))
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s (or pass %s to run without TLS anyway)", ErrInsecure, strings.Join(bad, "; "), InsecureFlag)
}
