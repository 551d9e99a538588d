package frontend

import (
	"context"
	"errors"
	"net/http"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// ErrUpstream: the engine could not be reached or failed before
// answering (502). The refusals of the edge itself (bad body or headers,
// body limits, routes, readiness) are oaiedge's.
var ErrUpstream = errors.New("frontend: upstream engine failed")

// ErrShuttingDown: the node is draining and its deadline passed while the
// request was still running (503; mid-stream, an error event). Clients
// retry it on another node.
var ErrShuttingDown = errors.New("frontend: node shutting down")

// StatusClientClosed is the status recorded (never seen by the client)
// when the client went away before the response: nginx's 499.
const StatusClientClosed = 499

// errorTable maps every error the frontend answers with to its HTTP status,
// OpenAI error type and code and retry advice, dispatch.ErrOverloaded to
// overloadStatus (Config.OverloadStatus); it is the only place that does
// so. An overload advises a retry after dispatch.DefaultRetryAfter, or
// after its policy class's advice (PolicyClassError.RetryAdvice). Rows are
// matched in order, before oaiedge's own; an error matching no row is a
// 500.
func errorTable(overloadStatus int) oaiedge.Table {
	return oaiedge.NewTable(ErrorRows(overloadStatus)...)
}

// ErrorRows are the frontend's rows of its error table, the dispatcher's
// refusals among them. The node's other edges (the selection API and the
// endpoint picker) answer the dispatcher's refusals with these same
// rows, so that a client gets the same status whichever edge routed it.
func ErrorRows(overloadStatus int) []oaiedge.Row {
	const invalid, server = "invalid_request_error", "server_error"
	return []oaiedge.Row{
		oaiedge.Entry(dispatch.ErrBadRequest, http.StatusBadRequest, invalid, "invalid_request"),
		oaiedge.Entry(dispatch.ErrPromptTooLong, http.StatusBadRequest, invalid, "context_length_exceeded"),
		oaiedge.Entry(dispatch.ErrModelNotFound, http.StatusNotFound, invalid, "model_not_found"),
		oaiedge.Entry(dispatch.ErrSessionNotFound, http.StatusNotFound, invalid, "session_not_found"),
		oaiedge.Entry(dispatch.ErrSessionLimit, http.StatusTooManyRequests, "rate_limit_error", "session_limit"),
		oaiedge.Entry(dispatch.ErrOverloaded, overloadStatus, server, "overloaded").Retry(dispatch.DefaultRetryAfter),
		oaiedge.Entry(dispatch.ErrNoEngine, http.StatusServiceUnavailable, server, "no_engine"),
		oaiedge.Entry(dispatch.ErrStoreFull, http.StatusServiceUnavailable, server, "store_full").Retry(storeFullRetryAfter),
		oaiedge.Entry(ErrUpstream, http.StatusBadGateway, server, "upstream_error"),
		oaiedge.Entry(ErrShuttingDown, http.StatusServiceUnavailable, server, "shutting_down"),
		oaiedge.Entry(ErrAdminDisabled, http.StatusForbidden, invalid, "admin_api_disabled"),
		oaiedge.Entry(context.Canceled, StatusClientClosed, invalid, "client_closed"),
		oaiedge.Entry(context.DeadlineExceeded, http.StatusGatewayTimeout, server, "timeout"),
	}
}

// outcome is the Requests metric's outcome label of a status.
func outcome(status int) string {
	return outcomes[outcomeIndex(status)]
}
