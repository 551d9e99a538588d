package main

import (
	"log/slog"

	"github.com/spf13/pflag"
)

// registerPeers registers --peer-dcs, the other DCs' relays, its
// deprecated name --peers, and how their gateways are reached. The relay's option was called --peers, which in
// `kvrouter node` names the raft members in another syntax; one name with
// two syntaxes broke any environment or config file shared by both
// subcommands (KVR_PEERS), so the relay's option is now --peer-dcs.
func (f *relayFlags) registerPeers(fs *pflag.FlagSet) {
	fs.StringSliceVar(&f.peers, "peer-dcs", nil, "other DCs' relays, dc=publish_addr/gateway_addr/wan_rtt each\n"+
		"For example eu=10.1.0.5:7200/10.1.0.5:8080/80ms. A DC with several relays not behind one Service is "+
		"listed once per relay, with the same wan_rtt.")
	fs.BoolVar(&f.peersHTTPS, "peer-gateways-https", false, "reach the peers' gateways over HTTPS\n"+
		"They run with --gateway-tls-*; trusted by --wan-tls-ca when set, else by the system's roots.")
	c := fs.Lookup("peer-dcs")
	old := fs.VarPF(deprecatedName{aliasValue: aliasValue{Value: c.Value, canon: "peer-dcs"}, name: "peers"}, "peers", "",
		"deprecated name of --peer-dcs; logs a warning\nSame syntax; KVR_PEERS and the peers key likewise.")
	old.DefValue = c.DefValue
}

// deprecatedName is an old name of an option: it sets the option and
// warns, whether it comes from the command line, the file or the
// environment.
type deprecatedName struct {
	aliasValue
	name string
}

func (d deprecatedName) Set(s string) error {
	slog.Warn("deprecated option: use --"+d.canon, "option", "--"+d.name)
	return d.aliasValue.Set(s)
}
