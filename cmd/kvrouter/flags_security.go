package main

import (
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/internal/secure"
)

// insecureUsage is the help of --insecure, for node and relay alike.
const insecureUsage = "allow non-loopback listeners without TLS (logged as a warning)\n" +
	"Without it such a configuration is refused."

// registerSecurity registers the node's TLS, its clients' and operators'
// credentials, and the credentials of its cluster membership.
func (f *nodeFlags) registerSecurity(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.StringVar(&c.TLSCert, "tls-cert", "", "PEM certificate: serve the API over HTTPS (with --tls-key)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.BoolVar(&c.Exposure.Insecure, secure.InsecureFlag[2:], false, insecureUsage)
	registerAccessFlags(fs, &c.Frontend.Edge.AccessConfig)
	cc := &c.Cluster
	fs.StringVar(&cc.TLSCert, "cluster-tls-cert", "", "member PEM certificate: mutual TLS on raft and the cluster API\n"+
		"With --cluster-tls-key and --cluster-tls-ca.")
	fs.StringVar(&cc.TLSKey, "cluster-tls-key", "", "PEM private key of --cluster-tls-cert")
	fs.StringVar(&cc.TLSCA, "cluster-tls-ca", "", "PEM CA certificate that signs every member's certificate")
	fs.StringVar(&cc.JoinTokenFile, "cluster-join-token-file", "", "file of the operator token that membership changes carry\n"+
		"Members accept a join or leave that carries it, and --join presents it.")
}

// registerSecurity registers the relay's TLS on its three sides (the
// gateway, the DC's cluster, the WAN) and its clients' and operators'
// credentials.
func (f *relayFlags) registerSecurity(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.BoolVar(&c.Insecure, secure.InsecureFlag[2:], false, insecureUsage)
	fs.StringVar(&c.GatewayTLSCert, "gateway-tls-cert", "", "PEM certificate: serve the gateway over HTTPS\nWith --gateway-tls-key.")
	fs.StringVar(&c.GatewayTLSKey, "gateway-tls-key", "", "PEM private key of --gateway-tls-cert")
	fs.StringVar(&c.WANTLS.Cert, "wan-tls-cert", "", "relay PEM certificate: mutual TLS between DCs\n"+
		"On the summary publication; with --wan-tls-key and --wan-tls-ca.")
	fs.StringVar(&c.WANTLS.Key, "wan-tls-key", "", "PEM private key of --wan-tls-cert")
	fs.StringVar(&c.WANTLS.CA, "wan-tls-ca", "", "PEM CA certificate that signs every relay's WAN certificate")
	fs.StringVar(&c.ClusterTLS.Cert, "cluster-tls-cert", "", "PEM certificate for the DC's cluster API (mutual TLS)\n"+
		"When its nodes run with --cluster-tls-*; with --cluster-tls-key and --cluster-tls-ca.")
	fs.StringVar(&c.ClusterTLS.Key, "cluster-tls-key", "", "PEM private key of --cluster-tls-cert")
	fs.StringVar(&c.ClusterTLS.CA, "cluster-tls-ca", "", "PEM CA certificate of the DC's cluster")
	registerAccessFlags(fs, &c.Edge.AccessConfig)
	fs.StringVar(&c.Edge.UpstreamToken, "node-operator-token", "", "operator token sent to nodes and peer gateways\n"+
		"To the router nodes' session routes and to peer gateways' session lookups; prefer KVR_NODE_OPERATOR_TOKEN.")
}
