// Package natsbus connects a kvrouter process to NATS: either to an external
// server (nats://host:port, the production setup) or to a server embedded in
// the process (the default for a single node, tests and the demo), built
// from github.com/nats-io/nats-server/v2 and listening on loopback so that
// engine processes can reach it.
//
// Security. An external server is reached with the credentials of
// ClientAuth (a .creds file, an nkey seed, user and password, or a token,
// with TLS client certificates and a CA as well if needed). An embedded
// server is secured by ServerSecurity: a users file (Users) whose routers
// may do anything and whose engines may publish only on their own
// subjects and subscribe only to their own snapshot requests and the
// discovery requests (kvrpb.EnginePublish, kvrpb.EngineSubscribe), and
// TLS on its listener, optionally requiring client certificates. The
// process's own connection to its embedded server is in-process, with a
// random password generated at each start. The server reports refused
// clients only in its log, which is read here to count them by kind
// (Config.OnViolation). No credential is ever logged or put in an error:
// errors name the option, and server URLs are redacted.
//
// The connection reconnects forever with backoff and reports its state to an
// optional callback (for the NATS connection metric). Close drains the
// connection and shuts an embedded server down, waiting for its goroutines.
//
// Concurrency: a Bus is safe for concurrent use; Close is idempotent.
package natsbus
