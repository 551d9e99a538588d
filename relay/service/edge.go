package service

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/relay/gateway"
)

// gatewayTLS builds the gateway's server TLS (oaiedge.ServerTLS), whose
// client certificates verified against the operator CA are operator
// credentials. Without an operator CA of its own, a gateway over TLS
// with WAN TLS verifies against the WAN CA, so that the peers' relays,
// which present their WAN certificate, may ask for a session's home. Nil
// without a certificate.
func gatewayTLS(c *Config) (*tls.Config, *mtls.Reloader, error) {
	e := &c.Edge
	if e.OperatorCA == "" && c.GatewayTLSCert != "" {
		e.OperatorCA = c.WANTLS.CA
	}
	cfg, r, err := oaiedge.ServerTLS("gateway_tls", c.GatewayTLSCert, c.GatewayTLSKey, e.OperatorCA)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return cfg, r, nil
}

// watchCerts counts and logs the gateway certificate's reloads.
func (r *Relay) watchCerts(gw *gateway.Gateway) {
	oaiedge.WatchReloads(r.certs, gw.EdgeMetrics(), r.log, "gateway")
}

// serveAdmin starts the gateway's admin listener when admin_addr is set,
// with the gateway's TLS when it has one, and returns what waits for it
// once ctx ends.
func (r *Relay) serveAdmin(ctx context.Context) (func(), error) {
	return oaiedge.ServeAdmin(ctx, r.cfg.Edge.AdminAddr, r.gwTLS, r.gw.ServeAdmin, r.log, "gateway admin routes on their own listener")
}
