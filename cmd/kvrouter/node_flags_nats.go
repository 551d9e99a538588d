package main

import (
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/fleet"
	"github.com/kvrouter/kvrouter/fleet/natsbus"
)

// registerNATS binds the node's NATS security and engine admission options.
func (f *nodeFlags) registerNATS(fs *pflag.FlagSet) {
	c := &f.cfg
	registerNATSClient(fs, &c.NATSSecurity.Client)
	s := &c.NATSSecurity.Server
	fs.StringVar(&s.UsersFile, "nats-users", "", "embedded NATS: YAML file of router and engine credentials (nkey public keys or bcrypt passwords); set, clients need credentials and each engine may publish only on its own subjects (see docs/engines.md)")
	fs.StringVar(&s.TLSCert, "nats-listen-tls-cert", "", "embedded NATS: PEM certificate; the server then speaks TLS only (with --nats-listen-tls-key)")
	fs.StringVar(&s.TLSKey, "nats-listen-tls-key", "", "embedded NATS: PEM private key of --nats-listen-tls-cert")
	fs.StringVar(&s.TLSCA, "nats-listen-tls-ca", "", "embedded NATS: PEM CA certificate; clients must then present a certificate it signed")
	e := &c.Events
	fs.IntVar(&e.MaxEngines, "max-engines", fleet.DefaultMaxEngines, "most engines registered; a new engine's card beyond it is refused (declared engines are always admitted)")
	fs.Float64Var(&e.RegistrationRate, "engine-registration-rate", fleet.DefaultRegistrationRate, "engine cards per second that may add, restart or update an engine once the burst is spent (refreshing cards are not limited)")
	fs.IntVar(&e.RegistrationBurst, "engine-registration-burst", fleet.DefaultRegistrationBurst, "engine cards that may add, restart or update engines at once")
}

// registerNATSClient binds the options that authenticate to an external
// NATS server; node, relay and mocker share them.
func registerNATSClient(fs *pflag.FlagSet, a *natsbus.ClientAuth) {
	fs.StringVar(&a.CredsFile, "nats-creds", "", "external NATS: .creds file (user JWT and nkey seed) to authenticate with")
	fs.StringVar(&a.NKeySeedFile, "nats-nkey-seed", "", "external NATS: file holding the user nkey seed to authenticate with")
	fs.StringVar(&a.User, "nats-user", "", "external NATS: user name (with --nats-password)")
	fs.StringVar(&a.Password, "nats-password", "", "external NATS: password of --nats-user (prefer KVR_NATS_PASSWORD: flags show in process lists)")
	fs.StringVar(&a.Token, "nats-token", "", "external NATS: authentication token (prefer KVR_NATS_TOKEN: flags show in process lists)")
	fs.StringVar(&a.TLSCert, "nats-tls-cert", "", "external NATS: PEM client certificate (with --nats-tls-key); implies TLS")
	fs.StringVar(&a.TLSKey, "nats-tls-key", "", "external NATS: PEM private key of --nats-tls-cert")
	fs.StringVar(&a.TLSCA, "nats-tls-ca", "", "external NATS: PEM CA certificate of the server (default: the system's roots); implies TLS")
}
