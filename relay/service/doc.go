// Package service assembles one DC's relay (`kvrouter relay`): the
// summaries the DC publishes, the summaries it follows, and the gateway
// that sends each request to the DC that should serve it.
//
//   - Ownership: a follow.Source follows the DC's replicated block
//     ownership over the router nodes' Ownership.Watch stream (any node;
//     it fails over between them and resumes by raft index, or from a
//     snapshot).
//   - Summaries: one producer.Producer per configured pool (model, block
//     size, the routing core's hashing); each batch of the stream is split
//     by pool (an engine's model comes from its card, which the relay
//     follows on the DC's NATS without KV events) and applied whole.
//     Pool loads, from the engines' heartbeats, ride on the summaries'
//     heartbeats. A snapshot of the stream reaches every pool as a
//     replacing batch, applied as a difference. One more producer, the
//     DC's session summary (producer.SessionDomain), holds the hashes of
//     the session keys the router cluster has bound, from the same
//     stream.
//   - Publication: a publish.Server on PublishAddr serves every pool's
//     summary to the other DCs' relays.
//   - Following: a consumer.Consumer subscribes to every peer's summary of
//     every pool and to its session summary. A peer DC may run several
//     relays, listed once each (peers.go): one connection spans them and
//     a lane whose relay fails resubscribes to another.
//   - Gateway: a gateway.Gateway on GatewayAddr is the DC's OpenAI
//     ingress; it measures the local prefix exactly (the producers'
//     reference-counted sets), the remote ones from the lanes, and
//     forwards to a peer's gateway at most once, or serves through the
//     DC's router nodes. Sessions are placed by their home DC and located
//     across DCs by a gateway.SummaryLocator: the peers' session lanes say
//     whom to ask, and the peer's gateway confirms over HTTP (see
//     relay/gateway, Sessions).
//
// Transport security: Config.ClusterTLS is the client side of the DC's
// cluster API when its nodes run with mutual TLS, and Config.WANTLS turns
// on mutual TLS for the publication service and the subscriptions to the
// peers (internal/mtls loads both). GatewayTLSCert and GatewayTLSKey
// serve the gateway over HTTPS; forwarded requests and session lookups
// go to the peers' gateway URLs as given, https ones trusting the WANTLS
// CA (or the system's roots without one) over one transport shared by the
// gateway and its session locator. The gateway does not ask clients or
// peers for certificates: forwarded requests are ordinary requests.
//
// What it refuses to do: it keeps no durable state (everything is rebuilt
// from the stream and the peers after a restart), joins no raft group, and
// never routes to an engine itself: the DC's router cluster does.
//
// Concurrency: Run starts every goroutine and returns after they stopped;
// the accessors are safe once WaitReady returned.
package service
