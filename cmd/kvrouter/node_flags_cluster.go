package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// deployFlags are the node options that serve its deployment: name
// resolution and the choice between bootstrapping and joining.
type deployFlags struct {
	dnsServer string
}

// registerCluster registers the node's membership of its DC's raft
// cluster: its addresses, its data, how it joins, and how names resolve.
func (f *nodeFlags) registerCluster(fs *pflag.FlagSet) {
	cc := &f.cfg.Cluster
	fs.StringVar(&cc.RaftAddr, "raft-addr", "", "raft address; set, the node is a member of its DC's cluster")
	fs.StringVar(&cc.APIAddr, "cluster-api-addr", "", "cluster API address (gRPC: write forwarding, kvrouter cluster)")
	fs.StringVar(&cc.DataDir, "data-dir", "", "directory of raft log, tables, snapshots (empty: in memory)")
	fs.StringSliceVar(&cc.Peers, "peers", nil, "static members, id=raft_addr/api_addr each, this node included")
	fs.BoolVar(&cc.Bootstrap, "bootstrap", false, "bootstrap a new cluster from --peers when the data dir is empty\n"+
		"Safe on every static member.")
	fs.StringVar(&cc.Join, "join", "", "a member's cluster API address to join by, on an empty data dir")
	fs.StringVar(&f.deploy.dnsServer, "dns-server", "", "host:port of the DNS server for every name the node uses\n"+
		"Peers, join, NATS and engines; default: the system's resolver.")
	fs.BoolVar(&cc.Recovery.RebuildOnCorruption, "rebuild-on-corruption", true, "rebuild a corrupt member's data from its peers\n"+
		"A member whose raft log fails its checksums at start (or whose corrupt newest snapshots leave a gap to "+
		"its log) sets its data aside (data_dir/corrupt-<time>), rejoins empty and is rebuilt from its peers; "+
		"false refuses to start and leaves the decision to the operator.")
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
	return slices.ContainsFunc(peers, func(p string) bool {
		name, _, ok := strings.Cut(p, "=")
		return ok && name == id
	})
}
