// Package freeport picks loopback addresses for processes that must know
// their listen addresses before they start: the members of a raft cluster
// list each other's addresses, and a member that restarts listens on its
// address again.
//
// Why not port 0. A port the kernel hands out for ":0" comes from the
// ephemeral range (net.ipv4.ip_local_port_range), the same range it takes
// the local ports of outgoing connections from. Such a port, free when
// picked, may meanwhile become the local end of another connection (one
// member dialling another), and a member restarting on its address then
// fails with "address already in use". Loopback returns ports below that
// range, which the kernel never assigns by itself.
//
// Guarantees. Loopback returns "127.0.0.1:<port>" for a port that accepted
// a listener a moment before it returned, never the same port twice in one
// process, and not a port another process got from Loopback in the last
// 15 minutes: each port is claimed by a file in a per-user directory under
// os.TempDir. Without those claims, two test binaries running at once
// (go test runs packages in parallel) could both pick a port in the
// seconds between one picking it and binding it, which failed CI runs. A
// program that does not use Loopback may still take a port in between.
//
// Concurrency. Loopback is safe for concurrent use.
package freeport
