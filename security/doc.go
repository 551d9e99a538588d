// Package security is the multi-process security suite: each test starts
// real kvrouter processes (the binary TestMain builds once) on loopback
// and mounts one attack from the threat model in docs/security.md, which
// must fail and must show up in the attacked process's metrics.
//
// Files: harness_test.go is the shared harness (the binary, processes,
// free addresses, metric scrapes); each area's attacks live in files named
// after it (cluster_*_test.go for the raft cluster and the relays, engines_*_test.go
// for the engines' registration, edges_*_test.go for the HTTP edges). The
// suite is short enough for `make test`.
//
// It is never linked into the product binary: it holds only tests.
package security
