package gateway

import (
	"net/http"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// EdgeConfig is who may call the gateway, what it presents upstream,
// where its admin routes are served and how sessions are named. Its
// operator credentials guard GET /v1/sessions/{id}/home, POST
// /v1/route/explain and GET /metrics. A client's Authorization header is
// passed on to the router nodes and to a peer DC's gateway with its
// request, so every edge of a deployment is given the same client keys
// (or none behind a gateway that has them). An OperatorCA lets the
// peers' relays, which present their WAN certificate, ask for a
// session's home.
type EdgeConfig struct {
	oaiedge.EdgeConfig
	// UpstreamToken is sent as "Authorization: Bearer" on the gateway's
	// own admin calls: the router nodes' session routes and the peers'
	// home lookups (NodeAuth); empty sends none.
	UpstreamToken string
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
