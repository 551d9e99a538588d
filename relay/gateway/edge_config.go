package gateway

import (
	"fmt"
	"net/http"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// EdgeConfig is who may call the gateway, what it presents upstream,
// where its admin routes are served and how sessions are named. The zero
// value keeps the open API of a demo: no client key, admin routes on
// loopback listeners only, the default session keys.
type EdgeConfig struct {
	// AccessConfig holds the client keys (the OpenAI API) and the
	// operator credentials (GET /v1/sessions/{id}/home, POST
	// /v1/route/explain, GET /metrics); see oaiedge.Access for the rules.
	// A client's Authorization header is passed on to the router nodes
	// and to a peer DC's gateway with its request, so every edge of a
	// deployment is given the same client keys (or none behind a gateway
	// that has them). An OperatorCA lets the peers' relays, which present
	// their WAN certificate, ask for a session's home.
	oaiedge.AccessConfig
	// UpstreamToken is sent as "Authorization: Bearer" on the gateway's
	// own admin calls: the router nodes' session routes and the peers'
	// home lookups (NodeAuth); empty sends none.
	UpstreamToken string
	// SessionKeys name the session headers and body fields; the router
	// nodes must be given the same.
	SessionKeys oaiedge.SessionKeys
	// AdminAddr, when set, is the address of the admin listener the relay
	// serves the admin routes on (ServeAdmin); /metrics and /v1/route/explain then leave
	// the client-facing listener.
	AdminAddr string
	// MaxBufferedBodyBytes bounds the request body bytes the gateway
	// holds over all its requests at once (oaiedge.BodyBudget): 0 means
	// oaiedge.MaxBufferedBodyBytes, negative none. A body that does not
	// fit is refused with 503 and Retry-After before it is read.
	MaxBufferedBodyBytes int64
}

// access builds the access control; messages name the option, never a
// key.
func (c EdgeConfig) access() (*oaiedge.Access, error) {
	a, err := c.AccessConfig.Build()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.UpstreamToken != "" {
		if _, err := oaiedge.NewKeys(c.UpstreamToken); err != nil {
			return nil, fmt.Errorf("%w: node_operator_token: %w", ErrConfig, err)
		}
	}
	return a, nil
}

// NodeAuth returns rt adding "Authorization: Bearer token" to every
// request that carries none, for the clients of the gateway's own admin
// calls (an HTTPLocator's); an empty token returns rt.
func NodeAuth(rt http.RoundTripper, token string) http.RoundTripper {
	if token == "" {
		return rt
	}
	if rt == nil {
		rt = http.DefaultTransport
	}
	return bearerTransport{rt: rt, value: "Bearer " + token}
}

// bearerTransport adds a bearer credential to requests that carry none.
type bearerTransport struct {
	rt    http.RoundTripper
	value string
}

// RoundTrip implements http.RoundTripper on a clone of req, as the
// interface requires of a transport that changes headers.
func (b bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") == "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", b.value)
	}
	return b.rt.RoundTrip(req)
}
