package frontend

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/kvrouter/kvrouter/node/dispatch"
)

// Errors of the frontend itself. Together with the dispatch sentinels they
// are mapped to HTTP status in errorTable, the only place that does so.
var (
	// ErrInvalidRequest: the body or a header is malformed or has a wrong
	// type or value (400).
	ErrInvalidRequest = errors.New("frontend: invalid request")
	// ErrBodyTooLarge: the body exceeds Config.MaxBodyBytes (413).
	ErrBodyTooLarge = errors.New("frontend: request body too large")
	// ErrBodyTimeout: the body did not arrive within Config.BodyReadTimeout
	// (408).
	ErrBodyTimeout = errors.New("frontend: request body read timed out")
	// ErrUpstream: the engine could not be reached or failed before
	// answering (502).
	ErrUpstream = errors.New("frontend: upstream engine failed")
	// ErrNotFound: no such route (404).
	ErrNotFound = errors.New("frontend: not found")
	// ErrMethodNotAllowed: the route exists for another method (405).
	ErrMethodNotAllowed = errors.New("frontend: method not allowed")
	// ErrNotReady: the node cannot serve requests yet, or is draining (503).
	ErrNotReady = errors.New("frontend: not ready")
)

// statusOverload stands for Config.OverloadStatus in errorTable.
const statusOverload = -1

// StatusClientClosed is the status recorded (never seen by the client)
// when the client went away before the response: nginx's 499.
const StatusClientClosed = 499

// errorClass is one row of the error table: the status and the OpenAI
// error type and code a sentinel maps to.
type errorClass struct {
	err    error
	status int
	typ    string
	code   string
}

// errorTable maps every error the frontend answers with to its HTTP status
// and OpenAI error type and code. Rows are matched in order with
// errors.Is; an error matching no row is a 500.
var errorTable = []errorClass{
	{ErrInvalidRequest, http.StatusBadRequest, "invalid_request_error", "invalid_request"},
	{dispatch.ErrBadRequest, http.StatusBadRequest, "invalid_request_error", "invalid_request"},
	{dispatch.ErrPromptTooLong, http.StatusBadRequest, "invalid_request_error", "context_length_exceeded"},
	{ErrBodyTooLarge, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large"},
	{ErrBodyTimeout, http.StatusRequestTimeout, "invalid_request_error", "request_timeout"},
	{ErrNotFound, http.StatusNotFound, "invalid_request_error", "not_found"},
	{ErrMethodNotAllowed, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed"},
	{dispatch.ErrModelNotFound, http.StatusNotFound, "invalid_request_error", "model_not_found"},
	{dispatch.ErrSessionNotFound, http.StatusNotFound, "invalid_request_error", "session_not_found"},
	{dispatch.ErrSessionLimit, http.StatusTooManyRequests, "rate_limit_error", "session_limit"},
	{dispatch.ErrOverloaded, statusOverload, "server_error", "overloaded"},
	{dispatch.ErrNoEngine, http.StatusServiceUnavailable, "server_error", "no_engine"},
	{ErrNotReady, http.StatusServiceUnavailable, "server_error", "not_ready"},
	{ErrUpstream, http.StatusBadGateway, "server_error", "upstream_error"},
	{context.Canceled, StatusClientClosed, "invalid_request_error", "client_closed"},
	{context.DeadlineExceeded, http.StatusGatewayTimeout, "server_error", "timeout"},
}

// internalError is the class of errors no row matches.
var internalError = errorClass{status: http.StatusInternalServerError, typ: "server_error", code: "internal_error"}

// classify returns err's row of the error table, with the configured
// overload status substituted.
func classify(err error, overloadStatus int) errorClass {
	for _, c := range errorTable {
		if errors.Is(err, c.err) {
			if c.status == statusOverload {
				c.status = overloadStatus
			}
			return c
		}
	}
	return internalError
}

// requestError is a client error that names the offending parameter.
type requestError struct {
	kind  error
	param string
	msg   string
}

func (e *requestError) Error() string { return e.msg }
func (e *requestError) Unwrap() error { return e.kind }

// badParam builds an ErrInvalidRequest naming param.
func badParam(param, format string, args ...any) error {
	return &requestError{kind: ErrInvalidRequest, param: param, msg: fmt.Sprintf(format, args...)}
}

// paramOf returns the parameter an error names, if any.
func paramOf(err error) string {
	var re *requestError
	if errors.As(err, &re) {
		return re.param
	}
	return ""
}

// outcome is the Requests metric's outcome label of a status.
func outcome(status int) string {
	return outcomes[outcomeIndex(status)]
}
