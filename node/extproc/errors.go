package extproc

import (
	"errors"
	"net/http"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/frontend"
)

// Errors of the picker itself.
var (
	// ErrProtocol: the stream broke the ext_proc protocol (a message out of
	// order); the stream ends with INVALID_ARGUMENT.
	ErrProtocol = errors.New("extproc: protocol violation")
	// ErrNoBody: an inference endpoint's request came without a body
	// (400).
	ErrNoBody = errors.New("extproc: the request has no body")
	// ErrUpstreamStatus ends a booking whose engine answered 5xx.
	ErrUpstreamStatus = errors.New("extproc: the engine answered with a server error")
)

// errorTable is the picker's one table: its own rows, then the frontend's
// (the dispatcher's refusals among them), then oaiedge's (an oversized
// body is 413, an unknown path 404). It gives every ImmediateResponse
// its status and OpenAI body.
func errorTable(overloadStatus int) oaiedge.Table {
	own := []oaiedge.Row{
		oaiedge.Entry(ErrNoBody, http.StatusBadRequest, "invalid_request_error", "invalid_request"),
	}
	return oaiedge.NewTable(append(own, frontend.ErrorRows(overloadStatus)...)...)
}

// fallsThrough reports whether FailOpen lets a request of class c go on
// without a destination: a failure of the router's side, not a refusal
// of the request and not an overload, which is a decision to shed.
func fallsThrough(c oaiedge.Class) bool {
	return c.Status >= 500 && c.Code != "overloaded"
}
