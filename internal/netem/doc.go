// Package netem emulates a network link for tests and the demo: a TCP
// proxy that adds a one-way delay to every chunk and can be cut (open
// connections closed, new ones refused) and restored. It stands in for
// the WAN between two DCs on loopback.
//
// Concurrency: a Proxy is safe for concurrent use; Close stops its
// goroutines and waits for them.
package netem
