package consensus

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/mtls/mtlstest"
)

// BenchmarkBindCommitTLS puts a bind's commit latency over raft's plain
// TCP transport beside the same over mutual TLS with identity checks (the
// transport a node builds with --cluster-tls-*), in one run and in
// alternation: 3 nodes on loopback, raft's in-memory log (so that the
// fsync does not hide the transport's cost), 1 and 64 clients. p50 and
// p99 are in microseconds.
func BenchmarkBindCommitTLS(b *testing.B) {
	ca := mtlstest.NewCA(b, b.TempDir())
	mtlsTransport := func(b *testing.B, id string) *raft.NetworkTransport {
		f := ca.Issue(b, mtls.Identity{DC: "dc1", Role: mtls.RoleMember, Name: id})
		server, client, err := mtls.Load("cluster_tls", f)
		if err != nil {
			b.Fatal(err)
		}
		member := mtls.AcceptRoles("dc1", mtls.RoleMember)
		tr, err := NewTLSTransport("127.0.0.1:0", mtls.Guard(server, member, nil), mtls.VerifyServer(client, member),
			nil, 3, 5*time.Second, nil, id)
		if err != nil {
			b.Fatal(err)
		}
		return tr
	}
	for _, clients := range []int{1, 64} {
		for _, s := range []struct {
			name string
			mk   func(*testing.B, string) *raft.NetworkTransport
		}{{"plain", tcpTransport}, {"mtls", mtlsTransport}} {
			b.Run(fmt.Sprintf("clients=%d/%s", clients, s.name), func(b *testing.B) {
				benchBinds(b, newTCPCluster(b, 3, false, s.mk), clients)
			})
		}
	}
}
