package main

import (
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/fleet/natsbus"
)

// registerNATSClient registers the options that authenticate to an
// external NATS server; node, relay and mocker share them.
func registerNATSClient(fs *pflag.FlagSet, a *natsbus.ClientAuth) {
	fs.StringVar(&a.CredsFile, "nats-creds", "", "external NATS: .creds file (user JWT and nkey seed)")
	fs.StringVar(&a.NKeySeedFile, "nats-nkey-seed", "", "external NATS: file of the user's nkey seed")
	fs.StringVar(&a.User, "nats-user", "", "external NATS: user name (with --nats-password)")
	fs.StringVar(&a.Password, "nats-password", "", "external NATS: password (prefer KVR_NATS_PASSWORD)\n"+
		"Flags show in process lists.")
	fs.StringVar(&a.Token, "nats-token", "", "external NATS: token (prefer KVR_NATS_TOKEN)\n"+
		"Flags show in process lists.")
	fs.StringVar(&a.TLSCert, "nats-tls-cert", "", "external NATS: PEM client certificate; implies TLS\nWith --nats-tls-key.")
	fs.StringVar(&a.TLSKey, "nats-tls-key", "", "external NATS: PEM private key of --nats-tls-cert")
	fs.StringVar(&a.TLSCA, "nats-tls-ca", "", "external NATS: PEM CA of the server; implies TLS\nDefault: the system's roots.")
}
