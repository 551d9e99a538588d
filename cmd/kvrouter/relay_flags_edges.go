package main

import "github.com/spf13/pflag"

// registerEdges registers the options of the gateway's HTTP edge: the
// ones a router node has, and the token the gateway presents to the
// nodes' session routes and the peers' home lookups.
func (f *relayFlags) registerEdges(fs *pflag.FlagSet) {
	e := &f.cfg.Edge
	registerAccessFlags(fs, &e.AccessConfig)
	registerAdminAddrFlag(fs, &e.AdminAddr)
	registerSessionKeyFlags(fs, &e.SessionKeys)
	fs.StringVar(&e.UpstreamToken, "node-operator-token", "", "operator token the gateway sends to the router nodes' session routes and to peer gateways' session lookups (prefer KVR_NODE_OPERATOR_TOKEN)")
}
