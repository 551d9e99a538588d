package node

import (
	"github.com/kvrouter/kvrouter/fleet/natsbus"
)

// NATSSecurity is how a node authenticates to an external NATS server, or
// secures the server it embeds. Neither is set by default: the embedded
// server then listens on loopback only and accepts any local client.
type NATSSecurity struct {
	// Client (nats_creds, nats_nkey_seed, nats_user, nats_password,
	// nats_token, nats_tls_*) authenticates to an external server.
	Client natsbus.ClientAuth
	// Server (nats_users, nats_listen_tls_*) secures an embedded server:
	// engines then register only with their own credentials, each on its
	// own subjects.
	Server natsbus.ServerSecurity
}

// natsConfig is the bus configuration of the node; onConn and onViolation
// may be nil.
func (c *Config) natsConfig(onConn func(bool), onViolation func(string)) natsbus.Config {
	return natsbus.Config{URL: c.NATS, EmbeddedAddr: c.NATSListen, Name: "kvrouter-node-" + c.NodeID, DC: c.DC,
		Auth: c.NATSSecurity.Client, Server: c.NATSSecurity.Server, OnConnected: onConn, OnViolation: onViolation}
}
