package telemetry

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ErrEndpoint reports an unusable endpoint option.
var ErrEndpoint = errors.New("telemetry: invalid OTLP endpoint")

// Protocols of OTLP, as OTEL_EXPORTER_OTLP_PROTOCOL spells them.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Endpoint is a parsed endpoint option.
type Endpoint struct {
	// URL is the collector's URL: http:// for cleartext, https:// for
	// TLS. For OTLP/HTTP it includes the traces path.
	URL string
	// Protocol is ProtocolGRPC or ProtocolHTTP.
	Protocol string
}

// ParseEndpoint parses the endpoint option s. "host:port" is OTLP/gRPC in
// cleartext. An http:// or https:// URL uses protocol (the value of
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL; gRPC
// when empty); for OTLP/HTTP a URL without a path gets /v1/traces, as the
// base URL of OTEL_EXPORTER_OTLP_ENDPOINT does. Anything else is refused.
func ParseEndpoint(s, protocol string) (Endpoint, error) {
	if s == "" {
		return Endpoint{}, fmt.Errorf("%w: empty", ErrEndpoint)
	}
	if !strings.Contains(s, "://") {
		host, port, err := net.SplitHostPort(s)
		if err != nil || host == "" || port == "" {
			return Endpoint{}, fmt.Errorf("%w: %q is neither host:port nor an http:// or https:// URL", ErrEndpoint, s)
		}
		return Endpoint{URL: "http://" + s, Protocol: ProtocolGRPC}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return Endpoint{}, fmt.Errorf("%w: %q: %v", ErrEndpoint, s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return Endpoint{}, fmt.Errorf("%w: %q: want an http:// or https:// URL with a host, or host:port", ErrEndpoint, s)
	}
	switch protocol {
	case "", ProtocolGRPC:
		return Endpoint{URL: s, Protocol: ProtocolGRPC}, nil
	case ProtocolHTTP:
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		return Endpoint{URL: u.String(), Protocol: ProtocolHTTP}, nil
	}
	return Endpoint{}, fmt.Errorf("%w: OTLP protocol %q: want %q or %q", ErrEndpoint, protocol, ProtocolGRPC, ProtocolHTTP)
}
