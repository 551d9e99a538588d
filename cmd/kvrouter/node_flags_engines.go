package main

import (
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/fleet"
)

// registerEngines registers how the node finds and reaches its engines.
func (f *nodeFlags) registerEngines(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.StringArrayVar(&c.Engines, "engine", nil, "declare an engine: url=URL[,model=M,...] (repeatable)\n"+
		"For engines without kvrouter code, one entry per engine and data-parallel rank: "+
		"url=URL[,model=M][,block-size=16][,kv-events=tcp://h:5557][,replay=tcp://h:5558][,replay-timeout=10s][,metrics=URL|none]"+
		"[,dp-rank=0][,kv-blocks=N][,max-batched-tokens=N][,role=prefill|decode][,bootstrap-port=P][,transfer-domain=D]. "+
		"In KVR_ENGINE, separate entries with ';'.")
	fs.StringArrayVar(&c.EngineDNS, "engine-dns", nil, "find engines by DNS: name=HOST|srv=NAME[,...] (repeatable)\n"+
		"name=HOST (A/AAAA) or srv=NAME, with port=8000, model=M, block-size=16, kv-events-port=P, replay-port=P, replay-timeout=10s, "+
		"metrics-path=/metrics, dp-size=1, scheme=http; re-resolved every 10s.")
	fs.StringVar(&c.EngineDNSServer, "engine-dns-server", "", "DNS server of --engine-dns, host:port (default: the system's)")
	fs.StringVar(&c.Frontend.EngineAPIKey, "engine-api-key", "", "bearer token sent to every engine (prefer KVR_ENGINE_API_KEY)\n"+
		"For engines started with --api-key; flags show in process lists.")
	fs.StringVar(&c.EngineTLSCA, "engine-tls-ca", "", "PEM CA of https engines (default: the system's roots)")
	fs.DurationVar(&c.Events.LivenessTimeout, "liveness-timeout", fleet.DefaultLivenessTimeout, "drop an engine whose heartbeats stop for this long")
}

// registerEventPlane registers the NATS server the engines register and
// publish on: the embedded one or an external one, and their security.
func (f *nodeFlags) registerEventPlane(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.StringVar(&c.NATS, "nats", c.NATS, `"embedded" (in-process) or nats://host:port`)
	fs.StringVar(&c.NATSListen, "nats-listen", c.NATSListen, "embedded NATS: listen address\nPort 0: any free port.")
	s := &c.NATSSecurity.Server
	fs.StringVar(&s.UsersFile, "nats-users", "", "embedded NATS: YAML file of router and engine credentials\n"+
		"nkey public keys or bcrypt passwords. Set, clients need credentials and each engine may publish only on "+
		"its own subjects (see docs/engines.md).")
	fs.StringVar(&s.TLSCert, "nats-listen-tls-cert", "", "embedded NATS: PEM certificate; the server then speaks TLS only")
	fs.StringVar(&s.TLSKey, "nats-listen-tls-key", "", "embedded NATS: PEM private key of --nats-listen-tls-cert")
	fs.StringVar(&s.TLSCA, "nats-listen-tls-ca", "", "embedded NATS: PEM CA that must sign every client's certificate")
	registerNATSClient(fs, &c.NATSSecurity.Client)
}
