package service

import (
	"crypto/tls"
	"fmt"
	"slices"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/mtls"
	"github.com/kvrouter/kvrouter/internal/secure"
)

// Flags that enable each listener's TLS, named in the refusal.
const (
	enableWANTLS     = "--wan-tls-cert, --wan-tls-key and --wan-tls-ca"
	enableGatewayTLS = "--gateway-tls-cert and --gateway-tls-key"
)

// listeners are the relay's listening sockets as configured.
func (c *Config) listeners() []secure.Listener {
	return []secure.Listener{
		{Key: "publish_addr", Addr: c.PublishAddr, TLS: c.WANTLS.Enabled(), Enable: enableWANTLS},
		{Key: "gateway_addr", Addr: c.GatewayAddr, TLS: c.GatewayTLSCert != "", Enable: enableGatewayTLS},
	}
}

// peerDCs are the DCs whose relays may subscribe to this one.
func (c *Config) peerDCs() []string {
	dcs := make([]string, 0, len(c.Peers))
	for _, p := range c.Peers {
		dcs = append(dcs, p.DC)
	}
	return dcs
}

// acceptPeerRelay accepts the relay of any peer DC: the summaries are the
// DC's cache state, load and sessions, for the federation's relays only.
func acceptPeerRelay(peers []string) mtls.Accept {
	return func(id mtls.Identity) error {
		if id.Role != mtls.RoleRelay {
			return mtls.Refuse(mtls.ReasonWrongRole, "%s is not a relay", id)
		}
		if !slices.Contains(peers, id.DC) {
			return mtls.Refuse(mtls.ReasonWrongDC, "%s is not of a peer dc %v", id, peers)
		}
		return nil
	}
}

// selfIdentity checks that link's certificate names this relay's DC with
// the relay role.
func selfIdentity(key string, cfg *tls.Config, dc string) error {
	id, err := mtls.IdentityOf(mtls.Own(cfg))
	if err != nil || id.Role != mtls.RoleRelay || id.DC != dc {
		return fmt.Errorf("%w: %s: must name this relay as kvr://%s/relay/<name> (found %v, %v)", ErrConfig, key, dc, id, err)
	}
	return nil
}

// wanLinks guards the publication service and checks the peers' identity
// when subscribing; nil configurations stay plaintext.
func wanLinks(c *Config, server, client *tls.Config, sec *metrics.Security) (*tls.Config, *tls.Config, error) {
	if server == nil {
		return nil, nil, nil
	}
	if err := selfIdentity("wan_tls_cert", server, c.DC); err != nil {
		return nil, nil, err
	}
	accept := acceptPeerRelay(c.peerDCs())
	return mtls.Guard(server, accept, func(r string) { sec.Refused("relay_publish", r) }), mtls.VerifyServer(client, accept), nil
}

// clusterLink checks the relay's cluster certificate and that the nodes
// it follows are members of its DC.
func clusterLink(c *Config, client *tls.Config) (*tls.Config, error) {
	if client == nil {
		return nil, nil
	}
	if err := selfIdentity("cluster_tls_cert", client, c.DC); err != nil {
		return nil, err
	}
	return mtls.VerifyServer(client, mtls.AcceptRoles(c.DC, mtls.RoleMember)), nil
}
