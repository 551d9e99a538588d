package gateway

import (
	"context"
	"io"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/internal/telemetry"
)

// tracerName names the gateway's tracer.
const tracerName = "github.com/kvrouter/kvrouter/relay/gateway"

// Span names of the gateway. A traced request is the HTTP server span of
// otelhttp, then the gateway's request span, with the DC decision and the
// forward (to a router node of this DC or to another DC's gateway) as its
// children; the forward's trace context goes upstream in traceparent.
const (
	spanRequest  = "kvrouter.gateway "
	spanDecide   = "kvrouter.gateway.decide"
	spanForward  = "kvrouter.gateway.forward"
	attrDC       = "kvrouter.dc"
	attrRemote   = "kvrouter.forwarded"
	attrUpstream = "server.address"
)

// tracer is the gateway's tracer (a no-op one without a provider).
func (c *Config) tracer() trace.Tracer {
	if c.TracerProvider == nil {
		return noop.NewTracerProvider().Tracer(tracerName)
	}
	return c.TracerProvider.Tracer(tracerName)
}

// startRequest starts the request span under oaiedge.SpanParent.
func (g *Gateway) startRequest(r *http.Request, ep oaiedge.Endpoint) (*http.Request, trace.Span) {
	ctx, span := g.tracer.Start(oaiedge.SpanParent(r), spanRequest+ep.Path())
	return r.WithContext(ctx), span
}

// decide chooses the target under the decision span.
func (x *exchange) decide(req *oaiedge.Request, now time.Time) target {
	_, span := x.g.tracer.Start(x.r.Context(), spanDecide)
	defer span.End()
	t := x.target(req, now)
	span.SetAttributes(attribute.String(attrDC, t.dc), attribute.Bool(attrRemote, t.remote))
	return t
}

// startForward starts the forward span of one upstream attempt and writes
// its trace context into the upstream request's headers (replacing the
// client's traceparent, which names the caller's span, not ours).
func (x *exchange) startForward(ctx context.Context, h http.Header, base string) (context.Context, trace.Span) {
	ctx, span := x.g.tracer.Start(ctx, spanForward, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String(attrUpstream, base)))
	telemetry.Propagator.Inject(ctx, propagation.HeaderCarrier(h))
	return ctx, span
}

// endForward ends the forward span when the upstream answer was read
// (its body closed), or at once when there is no answer.
func endForward(span trace.Span, resp *http.Response, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "upstream failed")
		span.End()
		return
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, resp.Status)
	}
	resp.Body = &endOnClose{ReadCloser: resp.Body, span: span}
}

// endOnClose ends a span when the body it wraps is closed.
type endOnClose struct {
	io.ReadCloser
	span trace.Span
}

// Close closes the body and ends the span.
func (e *endOnClose) Close() error {
	err := e.ReadCloser.Close()
	e.span.End()
	return err
}
