// Package oaiedgetest is test support for the OpenAI edges' benchmarks:
// the timed request both the router node's and the gateway's latency
// benchmarks send. It is imported by tests only.
package oaiedgetest
