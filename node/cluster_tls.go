package node

import (
	"crypto/tls"
	"fmt"

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
