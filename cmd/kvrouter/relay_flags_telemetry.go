package main

import "github.com/spf13/pflag"

// registerTelemetry registers the relay's tracing option, the same as the
// node's --otlp-endpoint.
func (f *relayFlags) registerTelemetry(fs *pflag.FlagSet) {
	fs.StringVar(&f.cfg.OTLPEndpoint, "otlp-endpoint", "", "export the gateway's spans to this OTLP collector: host:port (gRPC, cleartext) or an http:// or https:// URL (protocol from OTEL_EXPORTER_OTLP_PROTOCOL, gRPC by default); empty: the OTEL_* environment decides, off without it")
}
