package oaiedge

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/kvrouter/kvrouter/internal/telemetry"
)

// Traced puts otelhttp's server span named operation, with W3C trace
// context from the client, around every route of an edge but the probes
// and /metrics, when tp records spans (Recording). Without them the
// handler is left bare, which costs nothing per request; the trace
// context is still passed on (SpanParent).
func Traced(h http.Handler, operation string, tp trace.TracerProvider) http.Handler {
	if !Recording(tp) {
		return h
	}
	return otelhttp.NewHandler(h, operation, otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(telemetry.Propagator), otelhttp.WithFilter(traced), otelhttp.WithSpanNameFormatter(spanName))
}

// traced leaves probes and scrapes out of the traces.
func traced(r *http.Request) bool {
	switch r.URL.Path {
	case "/health", "/ready", "/metrics":
		return false
	}
	return true
}

// spanName is the method and, for the fixed API paths, the path; paths
// with ids in them are not used, to keep span names few.
func spanName(_ string, r *http.Request) string {
	switch p := r.URL.Path; p {
	case Chat.Path(), Completions.Path(), "/v1/models", "/v1/route/explain":
		return r.Method + " " + p
	}
	return r.Method
}

// Recording reports whether tp records spans: it is set and is not the
// no-op provider (which a process configures when tracing is off).
func Recording(tp trace.TracerProvider) bool {
	_, off := tp.(noop.TracerProvider)
	return tp != nil && !off
}

// SpanParent is the parent of an edge's request span: otelhttp's server
// span when there is one, else the client's traceparent.
func SpanParent(r *http.Request) context.Context {
	ctx := r.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = telemetry.Propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	return ctx
}
