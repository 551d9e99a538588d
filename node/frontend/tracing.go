package frontend

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/routing"
)

// Span names of the frontend. A traced completion is otelhttp's HTTP
// server span, the frontend's request span under it, and two children:
// the routing decision and the engine call, whose trace context goes to
// the engine in traceparent.
const (
	spanRequest  = "kvrouter.frontend "
	spanRoute    = "kvrouter.route"
	spanUpstream = "kvrouter.upstream"
)

// startRequest starts the request span under oaiedge.SpanParent.
func (s *Server) startRequest(r *http.Request, ep oaiedge.Endpoint, id string) (context.Context, trace.Span) {
	return s.tracer.Start(oaiedge.SpanParent(r), spanRequest+ep.Path(), trace.WithAttributes(attribute.String("kvrouter.request_id", id)))
}

// route asks the router for a decision under the route span. A request
// whose own span records nothing (tracing off, or not sampled) gets no
// child spans: they would record nothing either, and cost allocations on
// every request.
func (x *exchange) route(ctx context.Context, req *dispatch.Request) (*dispatch.Decision, error) {
	if !x.span.IsRecording() {
		return x.s.router.Route(ctx, req)
	}
	ctx, span := x.s.tracer.Start(ctx, spanRoute)
	defer span.End()
	dec, err := x.s.router.Route(ctx, req)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "no decision")
		return nil, err
	}
	span.SetAttributes(attribute.String("kvrouter.worker", dec.Worker.String()),
		attribute.Int("kvrouter.blocks", dec.Blocks), attribute.Int("kvrouter.cached_blocks", dec.CachedBlocks),
		attribute.Bool("kvrouter.session_bound", dec.SessionBound))
	return dec, nil
}

// startUpstream starts the span of an engine call to url, of the
// decision's engine or (with a hop attribute) its prefill engine, unless
// the request's own span records nothing (see route): the engine then
// gets the request span's context, which is the client's when tracing
// is off.
func (x *exchange) startUpstream(ctx context.Context, url string, w routing.Worker, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !x.span.IsRecording() {
		return ctx, x.span
	}
	attrs = append(attrs, attribute.String("server.address", url), attribute.String("kvrouter.worker", w.String()))
	return x.s.tracer.Start(ctx, spanUpstream, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endUpstream records the engine call's outcome (the error proxy
// returns) and ends its span (a no-op on the request span that stands in
// for it when nothing records).
func endUpstream(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "engine call failed")
	}
	span.End()
}
