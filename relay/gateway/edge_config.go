package gateway

import (
	"fmt"
	"net/http"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// EdgeConfig is who may call the gateway, what it presents upstream, and
// how sessions are named. The zero value keeps the open API of a demo: no
// client key, admin routes on loopback listeners only, the default
// session keys.
type EdgeConfig struct {
	// APIKeys, when any is set, are required on the OpenAI API as
	// "Authorization: Bearer <key>"; empty, the API is open. A client's
	// Authorization header is passed on to the router nodes and to a
	// peer DC's gateway with its request, so every edge of a deployment
	// is given the same keys (or none behind a gateway that has them).
	APIKeys []string
	// OperatorTokens are the bearer credentials of the admin routes
	// (GET /v1/sessions/{id}/home, POST /v1/route/explain, GET /metrics).
	// With none and no OperatorCerts, admin routes are served on loopback
	// listeners only (oaiedge.Access).
	OperatorTokens []string
	// OperatorCerts makes a TLS client certificate the listener verified
	// an operator credential: the peers' relays present their WAN
	// certificate when they ask for a session's home.
	OperatorCerts bool
	// UpstreamToken is sent as "Authorization: Bearer" on the gateway's
	// own admin calls: the router nodes' session routes and the peers'
	// home lookups (NodeAuth); empty sends none.
	UpstreamToken string
	// SessionKeys name the session headers and body fields; the router
	// nodes must be given the same.
	SessionKeys oaiedge.SessionKeys
	// AdminSeparate serves /metrics and /v1/route/explain only on the
	// admin listener (ServeAdmin), not on the client-facing one.
	AdminSeparate bool
}

// access builds the access control; messages name the option, never a
// key.
func (c EdgeConfig) access() (*oaiedge.Access, error) {
	clients, err := oaiedge.NewKeys(c.APIKeys...)
	if err != nil {
		return nil, fmt.Errorf("%w: api keys: %w", ErrConfig, err)
	}
	operators, err := oaiedge.NewKeys(c.OperatorTokens...)
	if err != nil {
		return nil, fmt.Errorf("%w: operator tokens: %w", ErrConfig, err)
	}
	if c.UpstreamToken != "" {
		if _, err := oaiedge.NewKeys(c.UpstreamToken); err != nil {
			return nil, fmt.Errorf("%w: upstream operator token: %w", ErrConfig, err)
		}
	}
	return &oaiedge.Access{Clients: clients, Operators: operators, OperatorCerts: c.OperatorCerts}, nil
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
