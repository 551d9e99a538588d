package node

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/mtls"
)

// ClusterTLS loads the cluster network's mutual TLS: this member's
// certificate and key, and the CA that signs every member's certificate.
// The server side requires and verifies a client certificate from that
// CA; the client side verifies the server against it. The same files
// serve raft's transport, the cluster API, `kvrouter cluster` and a
// relay following the cluster's ownership stream.
func ClusterTLS(certFile, keyFile, caFile string) (server, client *tls.Config, err error) {
	server, client, err = mtls.Load("cluster_tls", mtls.Files{Cert: certFile, Key: keyFile, CA: caFile})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return server, client, nil
}

// tlsEnabled reports whether any cluster TLS file is set; validate
// requires all three together.
func (c *ClusterConfig) tlsEnabled() bool {
	return c.TLSCert != "" || c.TLSKey != "" || c.TLSCA != ""
}

// clusterLinks are the TLS configurations of the cluster's links, each
// authorizing its peers by certificate identity (kvr://<dc>/<role>/<id>):
// raft accepts and dials members of the DC only; the cluster API lets in
// the DC's members, relays and operators (its interceptors then decide
// per method, see consensus.Auth) and its clients accept members only.
type clusterLinks struct {
	raftServer, raftClient *tls.Config
	apiServer, apiClient   *tls.Config
}

// loadClusterLinks loads the cluster's TLS files and checks that this
// node's own certificate names it as a member of its DC: a member that
// would present another name would be refused by every peer. The
// certificate is reloaded when its files change (mtls.LoadReloading), and
// every reload is logged.
func loadClusterLinks(cc *ClusterConfig, dc, nodeID string, sec *metrics.Security, log *slog.Logger) (*clusterLinks, error) {
	files := mtls.Files{Cert: cc.TLSCert, Key: cc.TLSKey, CA: cc.TLSCA}
	server, client, err := mtls.LoadReloading("cluster_tls", files, mtls.LogReloads(log, "cluster"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	self := mtls.Identity{DC: dc, Role: mtls.RoleMember, Name: nodeID}
	if id, err := mtls.IdentityOf(mtls.Own(server)); err != nil || id != self {
		return nil, fmt.Errorf("%w: cluster_tls_cert: must name this node as %s (found %v, %v)", ErrConfig, self, id, err)
	}
	member := mtls.AcceptRoles(dc, mtls.RoleMember)
	return &clusterLinks{
		raftServer: mtls.Guard(server, member, func(r string) { sec.Refused("raft", r) }),
		raftClient: mtls.VerifyServer(client, member),
		apiServer: mtls.Guard(server, mtls.AcceptRoles(dc, mtls.RoleMember, mtls.RoleRelay, mtls.RoleOperator),
			func(r string) { sec.Refused("cluster_api", r) }),
		apiClient: mtls.VerifyServer(client, member),
	}, nil
}

// ReadJoinToken reads a join token file; empty path, no token.
func ReadJoinToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: cluster_join_token_file: %v", ErrConfig, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		// The token stays out of the message, which may be logged.
		return "", fmt.Errorf("%w: cluster_join_token_file %s: want one token without spaces", ErrConfig, path)
	}
	return tok, nil
}
