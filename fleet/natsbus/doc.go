// Package natsbus connects a kvrouter process to NATS: either to an external
// server (nats://host:port, the production setup) or to a server embedded in
// the process (the default for a single node, tests and the demo), built
// from github.com/nats-io/nats-server/v2 and listening on loopback so that
// engine processes can reach it.
//
// The connection reconnects forever with backoff and reports its state to an
// optional callback (for the NATS connection metric). Close drains the
// connection and shuts an embedded server down, waiting for its goroutines.
//
// Concurrency: a Bus is safe for concurrent use; Close is idempotent.
package natsbus
