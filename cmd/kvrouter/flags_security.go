package main

import (
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/internal/secure"
)

// insecureUsage is the help of --insecure, for node and relay alike.
const insecureUsage = "run listeners on non-loopback addresses without TLS (logged as a warning); without it such a configuration is refused"

// registerSecurity registers the node's exposure and membership
// credential options.
func (f *nodeFlags) registerSecurity(fs *pflag.FlagSet) {
	fs.BoolVar(&f.cfg.Exposure.Insecure, secure.InsecureFlag[2:], false, insecureUsage)
	fs.StringVar(&f.cfg.Cluster.JoinTokenFile, "cluster-join-token-file", "", "file holding the operator token for membership changes: members accept a join or leave that carries it, and --join presents it")
}

// registerSecurity registers the relay's exposure option.
func (f *relayFlags) registerSecurity(fs *pflag.FlagSet) {
	fs.BoolVar(&f.cfg.Insecure, secure.InsecureFlag[2:], false, insecureUsage)
}
