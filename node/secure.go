package node

import (
	"github.com/kvrouter/kvrouter/fleet/natsbus"
	"github.com/kvrouter/kvrouter/internal/secure"
)

// Exposure is what a node accepts about its listeners' exposure.
type Exposure struct {
	// Insecure (insecure) lets listeners on non-loopback addresses run
	// without TLS; each is then named in a warning at start. Without it
	// New refuses such a configuration, naming the flags that enable TLS.
	Insecure bool
}

// Flags that enable each listener's TLS, named in the refusal.
const (
	enableClientTLS  = "--tls-cert and --tls-key"
	enableClusterTLS = "--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca"
	enableNATSTLS    = "--nats-listen-tls-cert and --nats-listen-tls-key (with --nats-listen-tls-ca to require client certificates), --nats nats://... (an external NATS server with TLS), or --nats-listen on loopback"
)

// listeners are the node's listening sockets as configured.
func (c *Config) listeners() []secure.Listener {
	cc := &c.Cluster
	ls := []secure.Listener{
		{Key: "http_addr", Addr: c.HTTPAddr, TLS: c.TLSCert != "", Enable: enableClientTLS},
		{Key: "raft_addr", Addr: cc.RaftAddr, TLS: cc.tlsEnabled(), Enable: enableClusterTLS},
		{Key: "cluster_api_addr", Addr: cc.APIAddr, TLS: cc.tlsEnabled(), Enable: enableClusterTLS},
	}
	if c.NATS == natsbus.Embedded {
		// The embedded server speaks TLS only once given a certificate.
		tls := c.NATSSecurity.Server.TLSCert != ""
		ls = append(ls, secure.Listener{Key: "nats_listen", Addr: c.NATSListen, TLS: tls, Enable: enableNATSTLS})
	}
	return append(ls, c.selectionListeners()...)
}
