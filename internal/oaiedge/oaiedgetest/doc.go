// Package oaiedgetest is test support for the OpenAI edges: a minimal
// OpenAI wire client (Client, Stream) that the tests of the node, the
// frontend and the mocker drive them with, the timed request both the
// router node's and the gateway's latency benchmarks send, and the
// goroutine count around forwarded requests that both
// edges' tests use to check that forwarding starts no goroutine of its
// own. It is imported by tests only.
//
// Concurrency: its functions are called from one test goroutine; the
// request functions they are given must complete their request before
// returning.
package oaiedgetest
