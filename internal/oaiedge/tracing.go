package oaiedge

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/kvrouter/kvrouter/internal/telemetry"
)

// Traced puts otelhttp's server span named operation, with W3C trace
// context from the client, around every route of an edge but the probes
// and /metrics. The node and the gateway call it only when their tracer
// provider records spans; without one the handler is left bare.
func Traced(h http.Handler, operation string, tp trace.TracerProvider) http.Handler {
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
