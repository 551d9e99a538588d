package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Propagator is the trace-context format of every edge: W3C trace context
// and baggage.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(
	propagation.TraceContext{}, propagation.Baggage{})

// ShutdownTimeout bounds the flush of buffered spans at Shutdown: long
// enough for one batch to reach a reachable collector, short enough not to
// hold up a process that is stopping because of an unreachable one.
const ShutdownTimeout = 5 * time.Second

// Config says what a process's spans describe and where they go.
type Config struct {
	// ServiceName is service.name unless OTEL_SERVICE_NAME (or
	// OTEL_RESOURCE_ATTRIBUTES) sets it.
	ServiceName string
	// Attributes are further resource attributes (the DC, the instance).
	Attributes []attribute.KeyValue
	// Endpoint is the endpoint option (ParseEndpoint); empty leaves the
	// exporter to the OTEL_* environment.
	Endpoint string
	// Log receives export errors; nil discards them.
	Log *slog.Logger
}

// Tracing is a process's tracer provider: a real one when tracing is on,
// else a no-op one.
type Tracing struct {
	// Provider supplies tracers; never nil.
	Provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t.sdk != nil }

// Shutdown flushes buffered spans within ShutdownTimeout and stops the
// exporter. It is a no-op when tracing is off.
func (t *Tracing) Shutdown() error {
	if t.sdk == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	return t.sdk.Shutdown(ctx)
}

// Setup installs the propagator and the export error handler, and builds
// the tracer provider the configuration and the environment ask for (see
// the package doc for when tracing is on).
func Setup(ctx context.Context, cfg Config) (*Tracing, error) {
	getenv := os.Getenv
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	otel.SetTextMapPropagator(Propagator)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("opentelemetry: spans not exported", "err", err)
	}))
	off := &Tracing{Provider: noop.NewTracerProvider()}
	if !wanted(cfg.Endpoint, getenv) {
		return off, nil
	}
	exp, err := exporter(ctx, cfg.Endpoint, getenv)
	if err != nil {
		return nil, err
	}
	if autoexport.IsNoneSpanExporter(exp) {
		return off, nil
	}
	res, err := newResource(ctx, cfg)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	log.Info("exporting traces over OTLP", "endpoint", describe(cfg.Endpoint, getenv))
	return &Tracing{Provider: tp, sdk: tp}, nil
}

// wanted reports whether the option or the environment asks for traces.
func wanted(endpoint string, getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	return endpoint != "" || getenv("OTEL_TRACES_EXPORTER") != "" ||
		getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// exporter builds the span exporter: from the endpoint option when set
// (the rest of the OTLP settings, such as certificates and headers, still
// come from the environment), else by autoexport from the environment.
func exporter(ctx context.Context, endpoint string, getenv func(string) string) (sdktrace.SpanExporter, error) {
	if endpoint == "" {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTEL_* environment: %w", err)
		}
		return exp, nil
	}
	ep, err := ParseEndpoint(endpoint, protocol(getenv))
	if err != nil {
		return nil, err
	}
	if ep.Protocol == ProtocolHTTP {
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(ep.URL))
	}
	return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(ep.URL))
}

// protocol is the OTLP protocol the environment names for traces.
func protocol(getenv func(string) string) string {
	if p := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p != "" {
		return p
	}
	return getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
}

// describe names where spans go, for the start-up log line.
func describe(endpoint string, getenv func(string) string) string {
	for _, s := range []string{endpoint, getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), getenv("OTEL_EXPORTER_OTLP_ENDPOINT")} {
		if s != "" {
			return s
		}
	}
	return "OTEL_TRACES_EXPORTER=" + getenv("OTEL_TRACES_EXPORTER")
}

// newResource describes the process: the configured name and attributes,
// overridden by OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	attrs := append([]attribute.KeyValue{attribute.String("service.name", cfg.ServiceName)}, cfg.Attributes...)
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}
