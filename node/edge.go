package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/node/frontend"
)

// edgeTLS builds the client-facing TLS configuration: the tls_cert and
// tls_key pair served through a Reloader (a rotated certificate is served
// without a restart), and, with operator_ca, client certificates asked
// for and verified against it, which the frontend takes as operator
// credentials. Nil without tls_cert.
func (n *Node) edgeTLS() (*tls.Config, error) {
	c := &n.cfg
	ca := c.Frontend.Edge.OperatorCA
	if c.TLSCert == "" {
		if ca != "" {
			return nil, fmt.Errorf("%w: operator_ca needs tls_cert and tls_key: client certificates travel over TLS", ErrConfig)
		}
		return nil, nil
	}
	r, err := mtls.NewReloader("tls", c.TLSCert, c.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	n.certs = r
	cfg := r.ServerConfig()
	if ca != "" {
		if cfg.ClientCAs, err = mtls.CAPool("operator_ca", ca); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		// Clients of the OpenAI API have no certificate; operators may.
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// watchCerts counts and logs the certificate reloads of the client-facing
// TLS in the frontend's edge metrics.
func (n *Node) watchCerts(fe *frontend.Server) {
	if n.certs == nil {
		return
	}
	m := fe.EdgeMetrics()
	n.certs.Reloaded = func(err error) {
		m.Reloaded(err)
		if err != nil {
			n.log.Warn("client-facing certificate reload failed; serving the previous one", "err", err)
			return
		}
		n.log.Info("client-facing certificate reloaded")
	}
}

// serveAdmin starts the admin listener when admin_addr is set, with the
// client-facing TLS when there is one, and returns what waits for it to
// stop once ctx ends.
func (n *Node) serveAdmin(ctx context.Context, fe *frontend.Server) (func(), error) {
	addr := n.cfg.Frontend.Edge.AdminAddr
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin_addr %s: %w", addr, err)
	}
	if n.tls != nil {
		ln = tls.NewListener(ln, n.tls)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := fe.ServeAdmin(ctx, ln); err != nil && !errors.Is(err, net.ErrClosed) {
			n.log.Warn("admin listener stopped", "err", err)
		}
	}()
	n.log.Info("admin routes on their own listener", "admin", ln.Addr().String())
	return func() { <-done }, nil
}
