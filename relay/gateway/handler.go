package gateway

import (
	"net/http"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// exchange is one completion request in flight.
type exchange struct {
	g    *Gateway
	w    http.ResponseWriter
	r    *http.Request
	rc   *http.ResponseController
	ep   oaiedge.Endpoint
	body []byte
	// hold is the body's share of the gateway's body budget, given back
	// when the handler returns.
	hold oaiedge.BodyHold
	// session is the binding key, "" without a session.
	session string
}

// completionHandler serves one of the two completion endpoints.
func (g *Gateway) completionHandler(ep oaiedge.Endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r, span := g.startRequest(r, ep)
		defer span.End()
		x := &exchange{g: g, w: w, r: r, rc: http.NewResponseController(w), ep: ep}
		defer x.hold.Release()
		x.serve()
	}
}

// serve reads the request, chooses the DC and proxies. A request another
// gateway forwarded is served here before any parse: that gateway parsed
// it, and the router node behind this one parses it again in any case.
// Any other request is parsed once, and hashed once by the decision.
func (x *exchange) serve() {
	g := x.g
	var err error
	if x.body, x.hold, err = g.bodies.ReadHeld(x.w, x.r, nil); err != nil {
		x.reject(err)
		return
	}
	if from := x.r.Header.Get(ForwardedHeader); from != "" {
		x.serveForwardedIn(from)
		return
	}
	req, err := oaiedge.ParsePooled(x.body, x.ep, oaiedge.Options{MaxPromptTokens: g.cfg.MaxPromptTokens})
	if err != nil {
		x.reject(err)
		return
	}
	s, err := g.edge.SessionKeys.Read(x.r.Header, req)
	if err != nil {
		req.Release()
		x.reject(err)
		return
	}
	x.session = s.Key()
	g.exactTokens(req, x.ep, x.body)
	start := g.cfg.Now()
	t := x.decide(req, start)
	// The decision was the last reader of the token ids.
	req.Release()
	g.metrics.decisionTook(g.cfg.Now().Sub(start))
	if t.remote {
		x.serveRemote(t.dc)
		return
	}
	x.serveLocal(DecisionLocal)
}

// serveForwardedIn serves a request another gateway forwarded: always
// here, never forwarded again.
func (x *exchange) serveForwardedIn(from string) {
	if !validDC(from) {
		x.reject(oaiedge.Invalid(ForwardedHeader, "%s must name a DC", ForwardedHeader))
		return
	}
	x.serveLocal(DecisionForwardedIn)
}

// reject answers err and counts the request as rejected.
func (x *exchange) reject(err error) {
	errorTable.Write(x.w, err)
	x.g.metrics.decided(DecisionRejected)
}

// target is a chosen DC.
type target struct {
	remote bool
	dc     string
}
