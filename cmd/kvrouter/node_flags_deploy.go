package main

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/spf13/pflag"
)

// deployFlags are the node options that serve its deployment: name
// resolution and the choice between bootstrapping and joining.
type deployFlags struct {
	dnsServer string
}

func (f *nodeFlags) registerDeploy(fs *pflag.FlagSet) {
	fs.StringVar(&f.deploy.dnsServer, "dns-server", "", "host:port of the DNS server every name the node dials or listens on is resolved with (peers, join, NATS, engines; default: the system's resolver)")
}

// resolveDeploy applies the deployment options. With both --bootstrap and
// --join set, the node's place among --peers decides: one of the initial
// members bootstraps (a no-op once its data dir holds state), any other
// node joins. So one pod template serves every ordinal of a StatefulSet,
// and a member restarted with an empty disk rebootstraps the same
// configuration, which the leader's log then overwrites: it rejoins the
// existing cluster.
func (f *nodeFlags) resolveDeploy() error {
	if s := f.deploy.dnsServer; s != "" {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("--dns-server %q: %w", s, err)
		}
		net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, s)
		}}
	}
	cc := &f.cfg.Cluster
	if cc.Bootstrap && cc.Join != "" {
		if isPeer(cc.Peers, f.cfg.NodeID) {
			cc.Join = ""
		} else {
			cc.Bootstrap = false
		}
	}
	return nil
}

// isPeer reports whether id names one of the id=raft_addr/api_addr
// entries.
func isPeer(peers []string, id string) bool {
	for _, p := range peers {
		if name, _, ok := strings.Cut(p, "="); ok && name == id {
			return true
		}
	}
	return false
}
