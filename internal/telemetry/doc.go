// Package telemetry sets up a process's OpenTelemetry tracing by the
// conventions operators already use: the standard OTEL_* environment
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL "grpc" or
// "http/protobuf", OTEL_EXPORTER_OTLP_CERTIFICATE and the client
// certificate pair for TLS, OTEL_TRACES_EXPORTER, OTEL_TRACES_SAMPLER,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_BSP_*), read by the
// OpenTelemetry SDK and the contrib autoexport package rather than by
// code of ours, plus one optional endpoint given on the command line
// (--otlp-endpoint).
//
// Guarantees:
//   - Tracing is off unless asked for: by the endpoint option, by
//     OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or
//     by OTEL_TRACES_EXPORTER (a name other than "none"). The SDK's own
//     default (OTLP to localhost) is not used, so that a router started
//     without any of these neither dials a collector nor logs failures.
//     OTEL_SDK_DISABLED=true turns tracing off whatever else is set.
//   - An endpoint option is either used exactly as written or refused by
//     ParseEndpoint with an error naming it: "host:port" is OTLP/gRPC in
//     cleartext (what the option always meant), an http:// or https://
//     URL is a collector base URL whose protocol is the
//     OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL one (gRPC when unset), with TLS
//     for https. The SDK would keep its default endpoint on a URL it
//     cannot parse; this package never lets it.
//   - Export failures reach the log: Setup installs an OpenTelemetry error
//     handler that logs every error the SDK reports (a collector that
//     refuses or cannot be reached) at WARN.
//   - W3C trace context (traceparent, tracestate) and baggage are the
//     propagation format, in both directions (Propagator). It is also
//     installed as the global propagator, so code that asks the otel
//     package for one gets the same.
//
// It refuses to do metrics or logs over OTLP: metrics are Prometheus
// (internal/metrics), logs are log/slog on stderr.
//
// Concurrency: Setup installs process-wide OpenTelemetry state (the error
// handler and the propagator; the last call's logger receives export
// errors) and is meant to be called once per process component at start.
// The returned Tracing is safe for concurrent use.
package telemetry
