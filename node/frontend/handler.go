package frontend

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// exchange is one proxied completion request: the client side, what was
// parsed, the decision and what was observed of the answer.
type exchange struct {
	s     *Server
	w     http.ResponseWriter
	r     *http.Request
	rc    *http.ResponseController
	ep    oaiedge.Endpoint
	start time.Time
	id    string
	span  trace.Span
	// model is the metric label: set only once the router accepted the
	// model, so that clients cannot mint label values with made-up names.
	model  string
	status int
	p      *oaiedge.Request
	body   *body
	dec    *dispatch.Decision
	obs    observation
	// rerouted is set once the request was routed a second time.
	rerouted bool
	// sendBody, when set, is the body sent to the decision's engine in
	// place of the client's: a disaggregated request's decode hop
	// (handoff.go). pending is a prefill hop running beside it.
	sendBody *body
	pending  *concurrentPrefill
}

// completionHandler serves one of the two proxied endpoints.
func (s *Server) completionHandler(ep oaiedge.Endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		x := &exchange{s: s, w: w, r: r, rc: http.NewResponseController(w), ep: ep, start: s.cfg.Now(),
			obs: observation{promptTokens: -1, completionTokens: -1}}
		x.id = s.requestID(r)
		w.Header().Set("X-Request-Id", x.id)
		ctx, span := s.startRequest(r, ep, x.id)
		x.span = span
		x.begin()
		defer x.finish()
		x.serve(ctx)
	}
}

// serve reads, parses and routes the request, then proxies it. Every
// path past a successful Route calls Decision.Done exactly once.
func (x *exchange) serve(ctx context.Context) {
	if f := x.s.cfg.Serving; f != nil && !f() {
		x.fail(oaiedge.ErrNotReady)
		return
	}
	var err error
	if x.body, err = x.readBody(); err != nil {
		x.fail(err)
		return
	}
	if x.p, err = parseRequest(x.body.data, x.ep, x.s.cfg.MaxPromptTokens); err != nil {
		x.fail(err)
		return
	}
	x.exactTokens()
	req, err := x.dispatchRequest()
	if err != nil {
		x.fail(err)
		return
	}
	if x.dec, err = x.route(ctx, req); err != nil {
		x.fail(err)
		return
	}
	x.model = x.p.Model
	x.annotate(req)
	err = x.send(ctx)
	switch {
	case errors.Is(err, dispatch.ErrEngineUnreachable):
		x.dec.Done(err)
		err = x.reroute(ctx, req)
	case errors.Is(err, errPrefillFailed):
		// The prefill hop failed with nothing sent to the client: another
		// pair serves the request, never a decode engine alone (the
		// reference does not retry a dispatched prefill aggregated).
		x.dec.Done(err)
		req.PrefillFailed = true
		err = x.reroute(ctx, req)
	}
	x.dec.Done(err)
}

// reroute serves a request whose engine could not be reached, with
// nothing sent, on the engine a second Route chooses: Done has told the
// dispatcher, which leaves the first engine out. An engine killed without
// a goodbye stays registered until the liveness timeout; this is how its
// traffic moves at once instead. It happens at most once per request, and
// a session bound to the unreachable engine is rebound by the second Route
// as if the engine had left. The error is for the new decision's Done.
func (x *exchange) reroute(ctx context.Context, req *dispatch.Request) error {
	x.rerouted = true
	dec, err := x.route(ctx, req)
	if err != nil {
		x.fail(err)
		return err
	}
	x.span.SetAttributes(attribute.String("kvrouter.rerouted_from", x.dec.Worker.String()))
	x.dec = dec
	x.annotate(req)
	x.sendBody.release()
	x.sendBody = nil
	return x.send(ctx)
}

// readBody reads the whole body under MaxBodyBytes, BodyReadTimeout and
// the node's body budget (oaiedge.BodyReader, which explains the
// deadline), into a pooled buffer when the length is known (see body).
// The body keeps its share of the budget until its buffer is released.
func (x *exchange) readBody() (*body, error) {
	var b *body
	data, hold, err := x.s.bodies.ReadHeld(x.w, x.r, func(n int) []byte {
		b = getBody(n)
		return b.data
	})
	if err != nil {
		b.release()
		return nil, err
	}
	if b == nil {
		b = wrapBody(data)
	}
	b.hold = hold
	return b, nil
}

// dispatchRequest builds the routing request from the body and headers.
func (x *exchange) dispatchRequest() (*dispatch.Request, error) {
	ext, err := ParseNVExt(x.p.NVExt)
	if err != nil {
		return nil, err
	}
	return buildRequest(x.s.edge.SessionKeys, x.r.Header, x.p, ext, x.id, x.start)
}

// buildRequest builds the routing request of a parsed body, its parsed
// nvext and its headers: the session (headers, else the body's session
// fields, by keys), the pin headers (the prefill pin's too), the policy class, and the priority
// headers where nvext has none. Every edge of the node builds its
// requests here.
func buildRequest(keys oaiedge.SessionKeys, h http.Header, p *oaiedge.Request, ext NVExt, id string, arrival time.Time) (*dispatch.Request, error) {
	si, err := readSession(keys, h, p)
	if err != nil {
		return nil, err
	}
	class, err := readPolicyClass(h)
	if err != nil {
		return nil, err
	}
	if err := ext.priorityHeaders(h); err != nil {
		return nil, err
	}
	req := &dispatch.Request{
		ID: id, Model: p.Model, Tokens: p.Tokens, Text: p.Text, LoRA: p.LoRA, CacheSalt: p.CacheSalt,
		SessionID: si.ID, ParentSessionID: si.Parent, SessionFinal: si.Final, Pin: si.Pin, PrefillPin: si.PrefillPin,
		MaxTokens: p.MaxTokens, Arrival: arrival, PolicyClass: class,
	}
	return req, ext.apply(req)
}

// annotate records the decision on the span and in the debug log, when
// either records anything: the attributes and the worker's name would
// otherwise be built on every request for nothing.
func (x *exchange) annotate(req *dispatch.Request) {
	d := x.dec
	if x.s.log.Enabled(context.Background(), slog.LevelDebug) {
		x.s.log.Debug("routed", "request", x.id, "model", x.model, "worker", d.Worker.String(),
			"session", req.SessionID, "cached_blocks", d.CachedBlocks, "blocks", d.Blocks, "prefill_worker", prefillWorker(d))
	}
	if !x.span.IsRecording() {
		return
	}
	x.span.SetAttributes(
		attribute.String("gen_ai.request.model", x.model),
		attribute.String("kvrouter.worker", d.Worker.String()),
		attribute.Int("kvrouter.blocks", d.Blocks),
		attribute.Int("kvrouter.cached_blocks", d.CachedBlocks),
		attribute.Bool("kvrouter.session_bound", d.SessionBound),
		attribute.Bool("kvrouter.stream", x.p.Stream))
	if d.Prefill != nil {
		x.span.SetAttributes(attribute.String("kvrouter.prefill_worker", d.Prefill.Worker.String()))
	}
}

// fail answers with err's error class, unless the client is gone.
func (x *exchange) fail(err error) {
	c := x.s.errs.Classify(err)
	x.status = c.Status
	x.span.RecordError(err)
	if c.Status != StatusClientClosed {
		c.Answer(x.w, err, errorBody(err, c))
	}
}

// errorBody is the body of err's answer in class c: the structured body
// of a policy-class refusal, the cause of a full store, else the OpenAI
// error body.
func errorBody(err error, c oaiedge.Class) []byte {
	if b, ok := overloadBody(err, c); ok {
		return b
	}
	if b, ok := storeFullBody(err, c); ok {
		return b
	}
	return oaiedge.ErrorJSON(err, c)
}

// finish records the request's metrics and ends its span.
func (x *exchange) finish() {
	if x.status == 0 {
		x.status = http.StatusOK
	}
	x.record()
	// The token ids were lent to the router for Route only (see
	// dispatch.Request), and the metrics above were the last reader.
	x.p.Release()
	// The engine transport may still hold a reader of the body; the
	// buffer returns to its pool when that is closed too.
	x.body.release()
	x.sendBody.release()
	if p := x.pending; p != nil { // proxy always waits for it; this is the backstop
		p.cancel()
		<-p.done
	}
	if x.span.IsRecording() {
		x.span.SetAttributes(attribute.Int("http.response.status_code", x.status))
		if x.status >= 500 || x.status == StatusClientClosed {
			x.span.SetStatus(codes.Error, outcome(x.status))
		}
	}
	x.span.End()
}

// prefillWorker names a decision's prefill rank, "" for an aggregated
// one.
func prefillWorker(d *dispatch.Decision) string {
	if d.Prefill == nil {
		return ""
	}
	return d.Prefill.Worker.String()
}
