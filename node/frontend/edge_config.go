package frontend

import (
	"fmt"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// EdgeConfig is who may call the frontend, where its admin routes are
// served and how sessions are named. The zero value keeps the open API
// of a demo: no client key, admin routes on loopback listeners only, the
// default session keys.
type EdgeConfig struct {
	// AccessConfig holds the client keys (the OpenAI API) and the
	// operator credentials (GET and DELETE /v1/sessions/{id}, POST
	// /v1/route/explain, GET /metrics); see oaiedge.Access for the rules.
	oaiedge.AccessConfig
	// SessionKeys name the session headers and body fields; the relay's
	// gateway must be given the same.
	SessionKeys oaiedge.SessionKeys
	// AdminAddr, when set, is the address of the admin listener the node
	// serves the admin routes on (ServeAdmin); /metrics and /v1/route/explain then leave
	// the client-facing listener.
	AdminAddr string
	// MaxBufferedBodyBytes bounds the request body bytes the node holds
	// over all its requests at once (oaiedge.BodyBudget): 0 means
	// oaiedge.MaxBufferedBodyBytes, negative none. A body that does not
	// fit is refused with 503 and Retry-After before it is read.
	MaxBufferedBodyBytes int64
}

// access builds the access control; messages name the option but never a
// key.
func (c EdgeConfig) access() (*oaiedge.Access, error) {
	a, err := c.AccessConfig.Build()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return a, nil
}
