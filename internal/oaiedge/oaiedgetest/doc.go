// Package oaiedgetest is test support for the OpenAI edges: the timed
// request both the router node's and the gateway's latency benchmarks
// send, and the goroutine count around forwarded requests that both
// edges' tests use to check that forwarding starts no goroutine of its
// own. It is imported by tests only.
//
// Concurrency: its functions are called from one test goroutine; the
// request functions they are given must complete their request before
// returning.
package oaiedgetest
