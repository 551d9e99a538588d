package oaiedge

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvrouter/kvrouter/internal/metrics"
)

// EdgeConfig is who may call an edge, where its admin routes are served
// and how sessions are named, alike for router nodes and gateways. The
// zero value keeps the open API of a demo: no client key, admin routes
// on loopback listeners only, the default session keys.
type EdgeConfig struct {
	// AccessConfig holds the client keys (the OpenAI API) and the
	// operator credentials (the admin routes: the session routes, POST
	// /v1/route/explain, GET /metrics); see Access for the rules.
	AccessConfig
	// SessionKeys name the session headers and body fields; a gateway
	// and the router nodes behind it must be given the same.
	SessionKeys SessionKeys
	// AdminAddr, when set, is the address of the admin listener the
	// process serves the admin routes on (the edge's ServeAdmin);
	// /metrics and /v1/route/explain then leave the client-facing
	// listener.
	AdminAddr string
	// MaxBufferedBodyBytes bounds the request body bytes the edge holds
	// over all its requests at once (BodyBudget): 0 means
	// MaxBufferedBodyBytes, negative none. A body that does not fit is
	// refused with 503 and Retry-After before it is read.
	MaxBufferedBodyBytes int64
}

// Edge is what an EdgeConfig builds.
type Edge struct {
	Access      *Access
	SessionKeys SessionKeys
	Budget      *BodyBudget
	// Metrics counts access refusals and certificate reloads; nil
	// without a registry.
	Metrics *metrics.Edge
}

// Build builds the access control, the session keys and the body budget
// of an edge whose bodies are of up to maxBody bytes. With reg, the body
// and edge metrics are registered there and every access refusal is
// counted. Errors name the option, never a key.
func (c EdgeConfig) Build(maxBody int64, reg prometheus.Registerer) (Edge, error) {
	var e Edge
	var err error
	if e.Access, err = c.AccessConfig.Build(); err != nil {
		return Edge{}, err
	}
	if e.SessionKeys, err = c.SessionKeys.Validate(); err != nil {
		return Edge{}, err
	}
	if e.Budget, err = NewEdgeBodyBudget(c.MaxBufferedBodyBytes, maxBody); err != nil {
		return Edge{}, fmt.Errorf("--max-buffered-body-bytes: %w", err)
	}
	if reg != nil {
		metrics.NewBodies(reg, e.Budget)
		m := metrics.NewEdge(reg)
		e.Metrics = m
		e.Access.Refused = func(scope Scope, reason string) { m.Refused(scope.String(), reason) }
	}
	return e, nil
}
