package frontend

import (
	"time"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// Edge limits. Each is the default of the matching Config field; the comment
// says why the value is what it is. They bound what one client can make the
// node hold (memory, goroutines, sockets) before any routing happens. The
// limits the DC gateway shares (body and prompt size, header, body, idle
// and stream write timeouts) are oaiedge's, the defaults of the matching
// Config fields as well.
const (
	// TextBytesPerToken converts a text prompt's length into an estimated
	// token count for the prompt limit and the input-token metric. Four bytes
	// per token is the usual ratio of English text under BPE tokenizers and
	// the ratio the mocker uses for its pseudo tokens.
	TextBytesPerToken = 4

	// MaxRequestIDBytes caps a client-supplied X-Request-Id; longer ids are
	// replaced by a generated one rather than echoed into logs and upstream.
	MaxRequestIDBytes = 128

	// MaxJSONDepth is the nesting limit of the request parser
	// (internal/oaiedge). It equals encoding/json's limit, so that the
	// router and an engine parsing the same bytes agree on which bodies
	// are well formed.
	MaxJSONDepth = oaiedge.MaxJSONDepth

	// WriteTimeout bounds writing a non-streaming response to the client.
	// Non-streaming bodies are written in one piece after the engine is
	// done, so a client that does not read them within 30 s is gone.
	WriteTimeout = 30 * time.Second

	// UpstreamDialTimeout bounds connecting to an engine; engines are in the
	// same data centre, so a connection that takes longer is a dead engine.
	UpstreamDialTimeout = 5 * time.Second

	// UpstreamHeaderTimeout bounds the wait for an engine's response
	// headers. A non-streaming engine answers only after generating the
	// whole completion, so the bound must cover a long generation.
	UpstreamHeaderTimeout = 10 * time.Minute

	// ShutdownTimeout is how long Serve waits for in-flight requests after
	// its context ends before it cancels them.
	ShutdownTimeout = 30 * time.Second

	// OverloadStatus is the default status for dispatch.ErrOverloaded: 529,
	// the status LLM clients already know as "overloaded, retry later", and
	// distinct from 503 (no engine at all).
	OverloadStatus = 529
)

// WorkerHeader is the response header naming the engine rank ("engine/rank")
// that served the request.
const WorkerHeader = "X-Kvrouter-Worker"
