package gateway

import (
	"errors"
	"io"
	"net/http"
	"os"
)

// exchange is one completion request in flight.
type exchange struct {
	g    *Gateway
	w    http.ResponseWriter
	r    *http.Request
	rc   *http.ResponseController
	ep   endpoint
	body []byte
	// session is the binding key, "" without a session.
	session string
}

// completionHandler serves one of the two completion endpoints.
func (g *Gateway) completionHandler(ep endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		x := &exchange{g: g, w: w, r: r, rc: http.NewResponseController(w), ep: ep}
		x.serve()
	}
}

// serve reads and checks the request, chooses the DC and proxies.
func (x *exchange) serve() {
	g := x.g
	if err := x.readBody(); err != nil {
		x.reject(err)
		return
	}
	req, tokens, err := parseRequestPooled(x.body, x.ep, g.cfg.MaxPromptTokens)
	if err != nil {
		x.reject(err)
		return
	}
	if x.session, err = sessionKey(x.r.Header); err != nil {
		releaseTokens(tokens)
		x.reject(err)
		return
	}
	if from := x.r.Header.Get(ForwardedHeader); from != "" {
		releaseTokens(tokens)
		x.serveForwardedIn(from)
		return
	}
	start := g.cfg.Now()
	t := x.target(&req, start)
	// The decision was the last reader of the token ids.
	releaseTokens(tokens)
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
		x.reject(badParam(ForwardedHeader, "%s must name a DC", ForwardedHeader))
		return
	}
	x.serveLocal(DecisionForwardedIn)
}

// readBody reads the body under the size limit and the read deadline.
func (x *exchange) readBody() error {
	g := x.g
	_ = x.rc.SetReadDeadline(g.cfg.Now().Add(BodyReadTimeout))
	defer func() { _ = x.rc.SetReadDeadline(noDeadline) }()
	rd := http.MaxBytesReader(x.w, x.r.Body, g.cfg.MaxBodyBytes)
	var body []byte
	var err error
	if n := x.r.ContentLength; n >= 0 && n <= g.cfg.MaxBodyBytes {
		// A declared length is read into one buffer of that size,
		// instead of the doublings of io.ReadAll.
		body = make([]byte, n)
		_, err = io.ReadFull(rd, body)
	} else {
		body, err = io.ReadAll(rd)
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return ErrBodyTooLarge
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ErrBodyTimeout
	case err != nil:
		return badParam("", "reading the request body: %v", err)
	}
	x.body = body
	return nil
}

// reject answers err and counts the request as rejected.
func (x *exchange) reject(err error) {
	writeError(x.w, err)
	x.g.metrics.decided(DecisionRejected)
}

// target is a chosen DC.
type target struct {
	remote bool
	dc     string
}

// handleHealth is liveness: the process serves HTTP.
func handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
}

// handleReady is readiness: some local router node is ready.
func (g *Gateway) handleReady(w http.ResponseWriter, _ *http.Request) {
	if !g.nodes.anyHealthy() {
		writeError(w, ErrNotReady)
		return
	}
	writeJSON(w, http.StatusOK, []byte(`{"status":"ready"}`))
}

// knownPaths are the fixed routes, for telling 405 from 404.
var knownPaths = []string{"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/ready", "/metrics"}

// handleUnknown answers what no route matched in the OpenAI error shape.
func handleUnknown(w http.ResponseWriter, r *http.Request) {
	for _, p := range knownPaths {
		if r.URL.Path == p {
			writeError(w, ErrMethodNotAllowed)
			return
		}
	}
	writeError(w, ErrNotFound)
}
