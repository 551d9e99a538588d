package gateway

import (
	"errors"
	"net/http"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// Errors of the gateway. They map to HTTP status in errorTable, the only
// place that does so; the refusals of the edge itself (bad body or
// headers, body limits, routes, readiness) are oaiedge's.
var (
	// ErrConfig: the Config is invalid.
	ErrConfig = errors.New("gateway: invalid config")
	// ErrNoNode: no local router node could be reached (502).
	ErrNoNode = errors.New("gateway: no router node reachable")
	// ErrModelNotFound: no local router node lists the model (404).
	ErrModelNotFound = errors.New("gateway: model not found")
	// ErrSessionUnavailable: the DC owning the session is unreachable and
	// Config.SessionFallback is off (503).
	ErrSessionUnavailable = errors.New("gateway: the session's data centre is unreachable")
)

// errorTable maps every error the gateway answers with to its status and
// OpenAI error type and code, matched in order with errors.Is, before
// oaiedge's own rows; anything else is a 500.
var errorTable = oaiedge.NewTable(
	oaiedge.Entry(ErrNoNode, http.StatusBadGateway, "server_error", "upstream_error"),
	oaiedge.Entry(ErrModelNotFound, http.StatusNotFound, "invalid_request_error", "model_not_found"),
	oaiedge.Entry(ErrSessionUnavailable, http.StatusServiceUnavailable, "server_error", "session_unavailable"),
)
