package frontend

import (
	"fmt"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// EdgeConfig is who may call the frontend and how sessions are named.
// The zero value keeps the open API of a demo: no client key, admin
// routes on loopback listeners only, the default session keys.
type EdgeConfig struct {
	// APIKeys, when any is set, are required on the OpenAI API as
	// "Authorization: Bearer <key>"; empty, the API is open.
	APIKeys []string
	// OperatorTokens are the bearer credentials of the admin routes
	// (GET and DELETE /v1/sessions/{id}, POST /v1/route/explain, GET
	// /metrics). With none and no OperatorCerts, admin routes are served
	// on loopback listeners only (oaiedge.Access).
	OperatorTokens []string
	// OperatorCerts makes a TLS client certificate verified by the
	// listener an operator credential.
	OperatorCerts bool
	// SessionKeys name the session headers and body fields; the relay's
	// gateway must be given the same.
	SessionKeys oaiedge.SessionKeys
	// AdminSeparate serves /metrics and /v1/route/explain only on the
	// admin listener (ServeAdmin), not on the client-facing one.
	AdminSeparate bool
}

// access builds the access control of the edge config; messages name
// the option but never a key.
func (c EdgeConfig) access() (*oaiedge.Access, error) {
	clients, err := oaiedge.NewKeys(c.APIKeys...)
	if err != nil {
		return nil, fmt.Errorf("%w: api keys: %w", ErrConfig, err)
	}
	operators, err := oaiedge.NewKeys(c.OperatorTokens...)
	if err != nil {
		return nil, fmt.Errorf("%w: operator tokens: %w", ErrConfig, err)
	}
	return &oaiedge.Access{Clients: clients, Operators: operators, OperatorCerts: c.OperatorCerts}, nil
}
