package service

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/relay/gateway"
)

// gatewayTLS builds the gateway's server TLS: its certificate through a
// Reloader (a rotated certificate is served without a restart), and
// client certificates asked for and verified against the operator CA,
// which the gateway takes as operator credentials. Without an operator
// CA of its own, a gateway over TLS with WAN TLS verifies against the
// WAN CA, so that the peers' relays, which present their WAN
// certificate, may ask for a session's home. Nil without a certificate.
func gatewayTLS(c *Config) (*tls.Config, *mtls.Reloader, error) {
	e := &c.Edge
	if c.GatewayTLSCert == "" {
		if e.OperatorCA != "" {
			return nil, nil, fmt.Errorf("%w: operator_ca needs gateway_tls_cert and gateway_tls_key", ErrConfig)
		}
		return nil, nil, nil
	}
	r, err := mtls.NewReloader("gateway_tls", c.GatewayTLSCert, c.GatewayTLSKey)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	cfg := r.ServerConfig()
	if e.OperatorCA == "" && c.WANTLS.CA != "" {
		e.OperatorCA = c.WANTLS.CA
	}
	if e.OperatorCA != "" {
		if cfg.ClientCAs, err = mtls.CAPool("operator_ca", e.OperatorCA); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		// Clients of the OpenAI API have no certificate; operators and
		// peers may.
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, r, nil
}

// watchCerts counts and logs the gateway certificate's reloads.
func (r *Relay) watchCerts(gw *gateway.Gateway) {
	if r.certs == nil {
		return
	}
	m := gw.EdgeMetrics()
	r.certs.Reloaded = func(err error) {
		m.Reloaded(err)
		if err != nil {
			r.log.Warn("gateway certificate reload failed; serving the previous one", "err", err)
			return
		}
		r.log.Info("gateway certificate reloaded")
	}
}

// serveAdmin starts the gateway's admin listener when admin_addr is set,
// with the gateway's TLS when it has one, and returns what waits for it
// once ctx ends.
func (r *Relay) serveAdmin(ctx context.Context) (func(), error) {
	addr := r.cfg.Edge.AdminAddr
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin_addr %s: %w", addr, err)
	}
	a := ln.Addr().String()
	if r.gwTLS != nil {
		ln = tls.NewListener(ln, r.gwTLS)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.gw.ServeAdmin(ctx, ln); err != nil && !errors.Is(err, net.ErrClosed) {
			r.log.Warn("admin listener stopped", "err", err)
		}
	}()
	r.log.Info("gateway admin routes on their own listener", "admin", a)
	return func() { <-done }, nil
}
