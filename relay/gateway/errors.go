package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Errors of the gateway. They map to HTTP status in errorTable, the only
// place that does so.
var (
	// ErrConfig: the Config is invalid.
	ErrConfig = errors.New("gateway: invalid config")
	// ErrInvalidRequest: the body or a header is malformed (400).
	ErrInvalidRequest = errors.New("gateway: invalid request")
	// ErrPromptTooLong: the prompt is over the token limit (400).
	ErrPromptTooLong = errors.New("gateway: prompt too long")
	// ErrBodyTooLarge: the body is over Config.MaxBodyBytes (413).
	ErrBodyTooLarge = errors.New("gateway: request body too large")
	// ErrBodyTimeout: the body did not arrive in time (408).
	ErrBodyTimeout = errors.New("gateway: request body read timed out")
	// ErrNotFound: no such route (404).
	ErrNotFound = errors.New("gateway: not found")
	// ErrMethodNotAllowed: the route exists for another method (405).
	ErrMethodNotAllowed = errors.New("gateway: method not allowed")
	// ErrNoNode: no local router node could be reached (502).
	ErrNoNode = errors.New("gateway: no router node reachable")
	// ErrSessionUnavailable: the DC owning the session is unreachable and
	// Config.SessionFallback is off (503).
	ErrSessionUnavailable = errors.New("gateway: the session's data centre is unreachable")
	// ErrNotReady: no local router node is ready (503).
	ErrNotReady = errors.New("gateway: not ready")
)

// errorClass is one row of the error table.
type errorClass struct {
	err    error
	status int
	typ    string
	code   string
}

// errorTable maps every error the gateway answers with to its status and
// OpenAI error type and code, matched in order with errors.Is; anything
// else is a 500.
var errorTable = []errorClass{
	{ErrInvalidRequest, http.StatusBadRequest, "invalid_request_error", "invalid_request"},
	{ErrPromptTooLong, http.StatusBadRequest, "invalid_request_error", "context_length_exceeded"},
	{ErrBodyTooLarge, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large"},
	{ErrBodyTimeout, http.StatusRequestTimeout, "invalid_request_error", "request_timeout"},
	{ErrNotFound, http.StatusNotFound, "invalid_request_error", "not_found"},
	{ErrMethodNotAllowed, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed"},
	{ErrNoNode, http.StatusBadGateway, "server_error", "upstream_error"},
	{ErrSessionUnavailable, http.StatusServiceUnavailable, "server_error", "session_unavailable"},
	{ErrNotReady, http.StatusServiceUnavailable, "server_error", "not_ready"},
}

// internalError is the class of errors no row matches.
var internalError = errorClass{status: http.StatusInternalServerError, typ: "server_error", code: "internal_error"}

// classify returns err's row of the error table.
func classify(err error) errorClass {
	for _, c := range errorTable {
		if errors.Is(err, c.err) {
			return c
		}
	}
	return internalError
}

// requestError is a client error naming the offending parameter.
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

// openAIError is the OpenAI error body.
type openAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	} `json:"error"`
}

// writeError answers err in the OpenAI shape with its table status and
// returns the status.
func writeError(w http.ResponseWriter, err error) int {
	c := classify(err)
	var body openAIError
	body.Error.Message, body.Error.Type, body.Error.Code = err.Error(), c.typ, c.code
	var re *requestError
	if errors.As(err, &re) && re.param != "" {
		body.Error.Param = &re.param
	}
	b, _ := json.Marshal(body)
	writeJSON(w, c.status, b)
	return c.status
}

// writeJSON writes a JSON answer.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
