// Package security is kvrouter's multi-process security suite: each test
// reproduces an attack on a DC (on the router cluster, the engines'
// registration, the relays or the HTTP edges) against real kvrouter
// processes on loopback, and asserts that it fails and that it shows in a
// metric. It holds tests only and is never linked into the product.
//
// The suite runs in `make test` in a short form; `go test -short` skips
// its multi-process tests.
package security
