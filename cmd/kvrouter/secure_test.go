package main

import (
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/internal/mtls/mtlstest"
)

// TestExposedListenersNeedTLS: the default configuration moved to 0.0.0.0
// refuses to start, and the error names the listener, the flags that
// enable its TLS and the --insecure override.
func TestExposedListenersNeedTLS(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "node client api", args: []string{"node", "--http-addr", "0.0.0.0:0"},
			want: []string{"http_addr 0.0.0.0:0", "--tls-cert", "--insecure"}},
		{name: "node embedded nats", args: []string{"node", "--nats-listen", "0.0.0.0:0"},
			want: []string{"nats_listen 0.0.0.0:0", "--nats-listen-tls-cert", "--nats-listen-tls-key", "--insecure"}},
		{name: "node raft and cluster api", args: []string{"node", "--raft-addr", "0.0.0.0:0", "--cluster-api-addr", "0.0.0.0:0",
			"--bootstrap", "--peers", "node1=0.0.0.0:0/0.0.0.0:0"},
			want: []string{"raft_addr 0.0.0.0:0", "cluster_api_addr 0.0.0.0:0", "--cluster-tls-cert", "--insecure"}},
		{name: "relay publication", args: []string{"relay", "--publish-addr", "0.0.0.0:0"},
			want: []string{"publish_addr 0.0.0.0:0", "--wan-tls-cert", "--insecure"}},
		{name: "relay gateway", args: []string{"relay", "--gateway-addr", ":8080"},
			want: []string{"gateway_addr :8080", "--gateway-tls-cert", "--insecure"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, tc.args...)
			if err == nil {
				t.Fatal("started without TLS on an exposed address")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// TestExposedNATSWithTLSStarts: the embedded NATS server on 0.0.0.0 with
// its TLS flags passes the check without --insecure.
// (The node then dials its own server at the listen address, which this
// loopback test certificate does not name; that later failure is not the
// check's.)
func TestExposedNATSWithTLSStarts(t *testing.T) {
	pki := mtlstest.WritePKI(t, t.TempDir())
	// The node serves once it started, its own connection to the exposed
	// TLS listener included, then stops cleanly when told.
	out, err := runUntilLogged(t, "router node serving", "node", "--http-addr", "127.0.0.1:0", "--nats-listen", "0.0.0.0:0",
		"--nats-listen-tls-cert", pki.Cert, "--nats-listen-tls-key", pki.Key, "--nats-listen-tls-ca", pki.CA)
	if err != nil || !strings.Contains(out, "router node serving") {
		t.Fatalf("a node with TLS on its exposed embedded NATS listener did not run: %v\n%s", err, out)
	}
}
