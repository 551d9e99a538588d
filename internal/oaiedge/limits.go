package oaiedge

import "time"

// Edge limits shared by both edges: a gateway refuses nothing a router
// node behind it would accept, and a node nothing a gateway let through.
// Each is the default of the matching Config field of node/frontend and
// relay/gateway; the comment says why the value is what it is.
const (
	// MaxBodyBytes caps a request body. A 1M-token prompt sent as a JSON
	// integer array is about 7 MB (token ids of up to six digits plus a
	// comma); a chat body with a few inline base64 images or a long
	// conversation is of the same order. 32 MiB leaves headroom over both
	// while keeping a body that is read in full (the router must see the
	// whole prompt to hash it) far below what would hurt the edge.
	MaxBodyBytes = 32 << 20

	// MaxPromptTokens is the default prompt length limit. 1Mi tokens is the
	// largest context current models offer; longer prompts cannot be served
	// by any engine, so refusing them at the edge saves the hashing and the
	// engine round trip.
	MaxPromptTokens = 1 << 20

	// ReadHeaderTimeout bounds the time a client may take to send the
	// request line and headers. This is the slowloris defence: a client that
	// opens many connections and trickles header bytes would otherwise pin a
	// goroutine and a socket per connection indefinitely. The deadline runs
	// from the first byte of the request and is not extended by progress,
	// so sending one byte per second does not help. Ten seconds is ample for
	// any honest client, even over a poor mobile link.
	ReadHeaderTimeout = 10 * time.Second

	// BodyReadTimeout bounds the time to receive the body, set per request as
	// a read deadline through http.ResponseController once the headers are
	// in. It is the slowloris defence for bodies: a client trickling a 32 MiB
	// body one byte at a time is cut. 30 s moves the largest allowed body
	// over a link of about 10 Mbit/s.
	BodyReadTimeout = 30 * time.Second

	// StreamWriteTimeout is the per-write deadline of streamed responses. It
	// is extended after every successful write, so a stream that is slow but
	// progressing lives as long as it needs while a client that stopped
	// reading (its TCP window is full and a write blocks) is cut after this
	// long. There is deliberately no server-wide WriteTimeout: it would cut
	// every stream longer than it, however healthy.
	StreamWriteTimeout = 30 * time.Second

	// IdleTimeout closes keep-alive connections that carry no request for
	// this long, bounding the sockets held by idle clients.
	IdleTimeout = 120 * time.Second

	// MaxHeaderBytes caps the request line plus headers. 64 KiB is far above
	// any OpenAI client's headers (a bearer token and a few ids) and keeps a
	// header flood from costing memory.
	MaxHeaderBytes = 64 << 10
)
