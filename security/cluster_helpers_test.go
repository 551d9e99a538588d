package security

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// member is one router node process of a DC's raft cluster.
type member struct {
	id, dc, http, raft, api string
	tls                     *mtls.Files
	p                       *proc
}

// newMember picks a member's loopback addresses.
func newMember(t *testing.T, dc, id string) *member {
	return &member{id: id, dc: dc, http: freeAddr(t), raft: freeAddr(t), api: freeAddr(t)}
}

// args are the node's command line, then extra.
func (m *member) args(t *testing.T, extra ...string) []string {
	a := []string{"node", "--dc", m.dc, "--node-id", m.id, "--http-addr", m.http, "--nats-listen", freeAddr(t),
		"--raft-addr", m.raft, "--cluster-api-addr", m.api, "--data-dir", t.TempDir(), "--log-level", "info",
		"--raft-heartbeat-timeout", "200ms", "--raft-election-timeout", "200ms"}
	if m.tls != nil {
		a = append(a, "--cluster-tls-cert", m.tls.Cert, "--cluster-tls-key", m.tls.Key, "--cluster-tls-ca", m.tls.CA)
	}
	return append(a, extra...)
}

// bootstrap starts m as a one-member cluster and waits until it leads.
func (m *member) bootstrap(t *testing.T, admin *mtls.Files, extra ...string) {
	t.Helper()
	m.p = start(t, m.id, m.args(t, append([]string{"--bootstrap", "--peers", m.id + "=" + m.raft + "/" + m.api}, extra...)...)...)
	c := dialAdmin(t, m.api, admin)
	waitFor(t, 20*time.Second, m.id+" leading", func() bool {
		st, err := c.Status(ctxFor(t), &kvrpb.AdminStatusRequest{})
		return err == nil && st.GetLeaderId() == m.id && st.GetReady()
	})
}

// metrics is m's Prometheus page.
func (m *member) metrics() string { return "http://" + m.http + "/metrics" }

// status is m's cluster status as admin sees it.
func (m *member) status(t *testing.T, admin *mtls.Files) *kvrpb.AdminStatusResponse {
	t.Helper()
	st, err := dialAdmin(t, m.api, admin).Status(ctxFor(t), &kvrpb.AdminStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// dial is a client connection to a cluster API or relay address over
// mutual TLS with files, plain TLS without a client certificate when
// files has no Cert, or plaintext when files is nil.
func dial(t *testing.T, addr string, files *mtls.Files) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if files != nil {
		creds = credentials.NewTLS(clientTLS(t, files))
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// clientTLS is a client configuration trusting files.CA and presenting
// files' certificate when it has one.
func clientTLS(t *testing.T, files *mtls.Files) *tls.Config {
	t.Helper()
	pool, err := mtls.CAPool("ca", files.CA)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	if files.Cert != "" {
		cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

func dialAdmin(t *testing.T, addr string, files *mtls.Files) kvrpb.ClusterAdminClient {
	return kvrpb.NewClusterAdminClient(dial(t, addr, files))
}

// ctxFor is a call context bounded at 30 s.
func ctxFor(t *testing.T) context.Context {
	// A failure bound, not an expectation: a node busy applying megabyte
	// events on a loaded two-core machine answered a Status after more
	// than 3 s.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// withToken adds a join token to ctx.
func withToken(ctx context.Context, tok string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-kvr-join-token", tok)
}

// writeToken writes a join token file.
func writeToken(t *testing.T, tok string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "join-token")
	if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ident is an identity of role in dc.
func ident(dc string, role mtls.Role, name string) mtls.Identity {
	return mtls.Identity{DC: dc, Role: role, Name: name}
}

func ptr[T any](v T) *T { return &v }
