package secure_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/internal/secure"
)

func TestLoopback(t *testing.T) {
	tests := []struct {
		name string
		addr string
		want bool
	}{
		{name: "ipv4 loopback", addr: "127.0.0.1:8000", want: true},
		{name: "other loopback", addr: "127.3.2.1:8000", want: true},
		{name: "ipv6 loopback", addr: "[::1]:8000", want: true},
		{name: "localhost", addr: "localhost:8000", want: true},
		{name: "all interfaces", addr: "0.0.0.0:8000"},
		{name: "empty host", addr: ":8000"},
		{name: "ipv6 any", addr: "[::]:8000"},
		{name: "routable", addr: "10.0.0.5:7000"},
		{name: "host name", addr: "router-0.svc:7000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := secure.Loopback(tc.addr); got != tc.want {
				t.Fatalf("Loopback(%q) = %v", tc.addr, got)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	raft := secure.Listener{Key: "raft_addr", Addr: "0.0.0.0:7000", Enable: "--cluster-tls-cert"}
	http := secure.Listener{Key: "http_addr", Addr: "10.0.0.1:8000", Enable: "--tls-cert"}
	tests := []struct {
		name     string
		ls       []secure.Listener
		insecure bool
		refused  []string
		warned   int
	}{
		{name: "loopback only", ls: []secure.Listener{{Key: "a", Addr: "127.0.0.1:1"}}},
		{name: "exposed with tls", ls: []secure.Listener{{Key: "a", Addr: "0.0.0.0:1", TLS: true}}},
		{name: "unset address", ls: []secure.Listener{{Key: "a"}}},
		{name: "exposed without tls", ls: []secure.Listener{raft, http}, refused: []string{"raft_addr 0.0.0.0:7000: set --cluster-tls-cert", "http_addr", "--tls-cert", "--insecure"}},
		{name: "overridden", ls: []secure.Listener{raft, http}, insecure: true, warned: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := secure.Check(tc.ls, tc.insecure, slog.New(slog.NewTextHandler(&buf, nil)))
			if (err != nil) != (len(tc.refused) > 0) || (err != nil && !errors.Is(err, secure.ErrInsecure)) {
				t.Fatalf("Check: %v", err)
			}
			for _, s := range tc.refused {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
			if got := strings.Count(buf.String(), "level=WARN"); got != tc.warned {
				t.Errorf("%d warnings, want %d: %s", got, tc.warned, buf.String())
			}
		})
	}
}
