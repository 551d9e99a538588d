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

// registerSecurity registers the relay's exposure option.
func (f *relayFlags) registerSecurity(fs *pflag.FlagSet) {
	fs.BoolVar(&f.cfg.Insecure, secure.InsecureFlag[2:], false, insecureUsage)
}
