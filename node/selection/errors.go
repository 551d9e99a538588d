package selection

import (
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/frontend"
)

// Errors of this package, beside the dispatcher's and the frontend's.
var (
	// ErrSelectionNotFound: Reserve names a selection that is unknown,
	// expired, pushed out or already reserved (404 / NOT_FOUND).
	ErrSelectionNotFound = errors.New("selection: selection not found")
	// ErrReservationNotFound: PrefillComplete names a reservation that is
	// unknown, expired or released (404 / NOT_FOUND).
	ErrReservationNotFound = errors.New("selection: reservation not found")
	// ErrReservationLimit: Config.MaxReservations are outstanding (429 /
	// RESOURCE_EXHAUSTED).
	ErrReservationLimit = errors.New("selection: too many outstanding reservations")
	// ErrClosed: the service is shutting down (503 / UNAVAILABLE).
	ErrClosed = errors.New("selection: shutting down")
)

// errorTable is the one table of this edge: this package's rows, then the
// frontend's (the dispatcher's refusals among them), then oaiedge's. It
// gives the HTTP mirror its status and OpenAI body, and the gRPC service
// the code of that status (Code).
func errorTable(overloadStatus int) oaiedge.Table {
	const invalid = "invalid_request_error"
	own := []oaiedge.Row{
		oaiedge.Entry(ErrSelectionNotFound, http.StatusNotFound, invalid, "selection_not_found"),
		oaiedge.Entry(ErrReservationNotFound, http.StatusNotFound, invalid, "reservation_not_found"),
		oaiedge.Entry(ErrReservationLimit, http.StatusTooManyRequests, "rate_limit_error", "reservation_limit"),
		oaiedge.Entry(ErrClosed, http.StatusServiceUnavailable, "server_error", "shutting_down"),
	}
	return oaiedge.NewTable(append(own, frontend.ErrorRows(overloadStatus)...)...)
}

// Code is the gRPC code of an error class, so that a gRPC edge answers
// an error with the code of the status its HTTP edge answers with.
// Overload, whatever status is configured for it, is RESOURCE_EXHAUSTED,
// so that clients back off.
func Code(c oaiedge.Class) codes.Code {
	if c.Code == "overloaded" {
		return codes.ResourceExhausted
	}
	switch c.Status {
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return codes.DeadlineExceeded
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case frontend.StatusClientClosed:
		return codes.Canceled
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return codes.Unavailable
	}
	if c.Status < 500 {
		return codes.InvalidArgument
	}
	return codes.Internal
}
