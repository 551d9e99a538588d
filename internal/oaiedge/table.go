package oaiedge

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Errors of the edge itself, common to every OpenAI edge: what reading a
// body, matching a route and readiness refuse. Their classes are in
// edgeRows, so that no edge repeats them.
var (
	// ErrBodyTooLarge: the body is over the edge's byte limit (413).
	ErrBodyTooLarge = errors.New("oaiedge: request body too large")
	// ErrBodyTimeout: the body did not arrive in time (408).
	ErrBodyTimeout = errors.New("oaiedge: request body read timed out")
	// ErrNotFound: no such route or resource (404).
	ErrNotFound = errors.New("oaiedge: not found")
	// ErrMethodNotAllowed: the route exists for another method (405).
	ErrMethodNotAllowed = errors.New("oaiedge: method not allowed")
	// ErrNotReady: the edge cannot serve requests yet, or is draining
	// (503).
	ErrNotReady = errors.New("oaiedge: not ready")
)

// Class is how an error is answered: its HTTP status, the OpenAI error
// type and code, and the retry advice.
type Class struct {
	Status int
	Type   string
	Code   string
	// RetryAfter is the class's retry advice: when positive, every answer
	// of the class carries Retry-After (RetrySeconds), so that a client
	// refused for a passing condition (overload, a full store or body
	// budget) knows when to come back instead of retrying at once.
	RetryAfter time.Duration
}

// RetryAdvisor is an error that carries its own retry advice, such as a
// queue refusal that knows its policy class's; when positive it wins over
// the class's RetryAfter.
type RetryAdvisor interface {
	RetryAdvice() time.Duration
}

// RetrySeconds is the Retry-After of err's answer in class c, in whole
// seconds rounded up (the header carries no fractions, and rounding down
// would bring a client back early); 0 means none. Only a class that
// advises a retry lets an error's own advice replace its RetryAfter.
func (c Class) RetrySeconds(err error) int64 {
	if c.RetryAfter <= 0 {
		return 0
	}
	d := c.RetryAfter
	var ra RetryAdvisor
	if errors.As(err, &ra) && ra.RetryAdvice() > 0 {
		d = ra.RetryAdvice()
	}
	return int64(math.Ceil(d.Seconds()))
}

// Answer writes an error answer of class c for err with body: the
// Retry-After of RetrySeconds, then body as JSON with c.Status. Every
// error answer of an edge is written here, the table's (Write) and an
// edge's own bodies alike, so that no answer of a class that advises a
// retry leaves without it.
func (c Class) Answer(w http.ResponseWriter, err error, body []byte) {
	c.setRetryAfter(w, err)
	WriteJSON(w, c.Status, body)
}

// setRetryAfter sets the Retry-After of err's answer in class c, if any.
func (c Class) setRetryAfter(w http.ResponseWriter, err error) {
	if s := c.RetrySeconds(err); s > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(s, 10))
	}
}

// Row maps a sentinel, matched with errors.Is, to its class.
type Row struct {
	Err error
	Class
}

// Entry is the row mapping err to status and the OpenAI error type and
// code, with no retry advice.
func Entry(err error, status int, typ, code string) Row {
	return Row{Err: err, Class: Class{Status: status, Type: typ, Code: code}}
}

// Retry returns r advising a retry after d (Class.RetryAfter).
func (r Row) Retry(d time.Duration) Row {
	r.RetryAfter = d
	return r
}

// Table maps every error an edge answers with to its class. Rows are
// matched in order; an error matching none is Internal.
type Table []Row

// Internal is the class of errors no row matches.
var Internal = Class{Status: http.StatusInternalServerError, Type: "server_error", Code: "internal_error"}

// edgeRows are the classes of the refusals of this package.
var edgeRows = []Row{
	Entry(ErrInvalid, http.StatusBadRequest, "invalid_request_error", "invalid_request"),
	Entry(ErrMalformed, http.StatusBadRequest, "invalid_request_error", "invalid_request"),
	Entry(ErrPromptTooLong, http.StatusBadRequest, "invalid_request_error", "context_length_exceeded"),
	Entry(ErrBodyTooLarge, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large"),
	Entry(ErrBodyTimeout, http.StatusRequestTimeout, "invalid_request_error", "request_timeout"),
	Entry(ErrNotFound, http.StatusNotFound, "invalid_request_error", "not_found"),
	Entry(ErrMethodNotAllowed, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed"),
	Entry(ErrNotReady, http.StatusServiceUnavailable, "server_error", "not_ready"),
}

// NewTable returns an edge's table: its own rows, then the rows of this
// package's refusals.
func NewTable(own ...Row) Table {
	return append(append(append(append(Table{}, own...), edgeRows...), authRows...), budgetRows...)
}

// Classify returns err's class.
func (t Table) Classify(err error) Class {
	for _, r := range t {
		if errors.Is(err, r.Err) {
			return r.Class
		}
	}
	return Internal
}

// Write answers err in the OpenAI shape with its class (Class.Answer)
// and returns the status.
func (t Table) Write(w http.ResponseWriter, err error) int {
	c := t.Classify(err)
	c.Answer(w, err, ErrorJSON(err, c))
	return c.Status
}

// Invalid refuses param (a body field or a header; "" for none) as
// invalid, with a message for the client.
func Invalid(param, format string, args ...any) error {
	return &Error{Kind: ErrInvalid, Param: param, Msg: fmt.Sprintf(format, args...)}
}

// ParamOf returns the parameter a refusal names, "" for none.
func ParamOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Param
	}
	return ""
}
