// Package demo runs kvrouter's live demonstration on loopback: one DC with
// an embedded NATS server, a 3-node router cluster in raft (Pebble on disk
// in a temporary directory) and simulated engines (mocker servers running
// in-process on their own ports), with a real HTTP client replaying the
// bundled Mooncake trace through the nodes' OpenAI-compatible API, once
// per routing policy on a fresh DC, and a report of what the client saw:
// cache hit ratio (from the engines' usage.prompt_tokens_details), TTFT
// percentiles, throughput, and session affinity.
//
// Each request carries a session id, its conversation (named by the first
// block of its prompt), and the nodes run hard affinity: every request of
// a conversation must be served by the engine its first request was bound
// to. Halfway through each replay the raft leader is killed (its requests
// in flight are cut, as by a crash) and restarted two seconds later from
// its data directory; the report counts the sessions served by more than
// one engine, which must be none.
//
// The client spreads requests round-robin over the live nodes and, as a
// load balancer would, moves a request on to the next node when its node
// refused the connection or died before the first token. A stream broken
// after its first token is reported as cut by the kill, not retried.
//
// Time is compressed: arrivals come Compress times faster than in the trace
// and the engines' timing model runs Compress times faster too, so the load
// relative to capacity is the trace's own.
//
// Serve mode leaves one DC running for curl or any OpenAI client.
//
// Concurrency: Run owns every goroutine it starts and returns only after
// they have stopped.
package demo
