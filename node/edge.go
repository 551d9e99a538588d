package node

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/frontend"
)

// edgeTLS builds the client-facing TLS configuration of tls_cert and
// tls_key, with operator_ca's client certificates as operator
// credentials (oaiedge.ServerTLS). Nil without tls_cert.
func (n *Node) edgeTLS() (*tls.Config, error) {
	c := &n.cfg
	cfg, r, err := oaiedge.ServerTLS("tls", c.TLSCert, c.TLSKey, c.Frontend.Edge.OperatorCA)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	n.certs = r
	return cfg, nil
}

// watchCerts counts and logs the certificate reloads of the client-facing
// TLS in the frontend's edge metrics.
func (n *Node) watchCerts(fe *frontend.Server) {
	oaiedge.WatchReloads(n.certs, fe.EdgeMetrics(), n.log, "client-facing")
}

// serveAdmin starts the admin listener when admin_addr is set, with the
// client-facing TLS when there is one, and returns what waits for it to
// stop once ctx ends.
func (n *Node) serveAdmin(ctx context.Context, fe *frontend.Server) (func(), error) {
	return oaiedge.ServeAdmin(ctx, n.cfg.Frontend.Edge.AdminAddr, n.tls, fe.ServeAdmin, n.log, "admin routes on their own listener")
}
