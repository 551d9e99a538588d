package main

import (
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/fleet/natsbus"
	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// The options that several subcommands share, with the same names and
// meaning: those of an OpenAI-compatible edge (a router node and a relay's
// gateway) and those of a NATS client (node, relay and mocker).

// registerBodyBudgetFlag registers --max-buffered-body-bytes.
func registerBodyBudgetFlag(fs *pflag.FlagSet, v *int64) {
	fs.Int64Var(v, "max-buffered-body-bytes", oaiedge.MaxBufferedBodyBytes, "body bytes held at once (-1: no limit)\n"+
		"Over all requests of the process. A body that does not fit is refused with 503 and Retry-After before it is read; "+
		"bodies over 1 MiB may use three quarters of the budget.")
}

// registerSessionKeyFlags registers where a request names its session.
func registerSessionKeyFlags(fs *pflag.FlagSet, k *oaiedge.SessionKeys) {
	fs.StringSliceVar(&k.Headers, "session-header", oaiedge.DefaultSessionHeaders, "session id headers, in order\n"+
		"The first present wins. Router nodes and gateways must agree.")
	fs.StringSliceVar(&k.BodyFields, "session-body-field", oaiedge.DefaultSessionBodyFields, "body fields of the session id\nUsed when no header names it; empty: none.")
}

// registerAccessFlags registers the credentials of clients and operators.
func registerAccessFlags(fs *pflag.FlagSet, a *oaiedge.AccessConfig) {
	fs.StringArrayVar(&a.APIKeys, "api-key", nil, "client key required on the API, as a bearer token (repeatable)\n"+
		"Prefer --api-key-file or KVR_API_KEY (';'-separated): flags show in process lists. With none, the API is open.")
	fs.StringVar(&a.APIKeyFile, "api-key-file", "", "file of client keys, one per line (# comments)")
	fs.StringArrayVar(&a.OperatorTokens, "operator-token", nil, "operator bearer token of the admin routes (repeatable)\n"+
		"The admin routes are the session routes, /metrics and /v1/route/explain. Prefer --operator-token-file. "+
		"With no token and no --operator-ca, admin routes answer on loopback listeners only.")
	fs.StringVar(&a.OperatorTokenFile, "operator-token-file", "", "file of operator tokens, one per line (# comments)")
	fs.StringVar(&a.OperatorCA, "operator-ca", "", "PEM CA of operators' client certificates (TLS listener)")
}

// registerObservability registers the logging options, the export of
// spans and the separate listener of the admin routes.
func registerObservability(fs *pflag.FlagSet, l *logFlags, otlpEndpoint, adminAddr *string) {
	l.register(fs)
	fs.StringVar(otlpEndpoint, "otlp-endpoint", "", "OTLP collector of request spans (empty: as OTEL_* says)\n"+
		"host:port (gRPC, cleartext) or an http:// or https:// URL (protocol from OTEL_EXPORTER_OTLP_PROTOCOL, gRPC by default).")
	fs.StringVar(adminAddr, "admin-addr", "", "serve /metrics and the admin routes on this address instead\n"+
		"The admin routes are the session routes and /v1/route/explain.")
}

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
