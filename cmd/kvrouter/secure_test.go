package main

import (
	"strings"
	"testing"
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
			want: []string{"nats_listen 0.0.0.0:0", "--insecure"}},
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
