package node_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/node"
)

func TestOTLPEndpointOption(t *testing.T) {
	tests := []struct {
		name, endpoint string
		ok             bool
	}{
		{name: "host:port", endpoint: "otel:4317", ok: true},
		{name: "http url", endpoint: "http://otel:4318", ok: true},
		{name: "https url", endpoint: "https://otel:4317", ok: true},
		{name: "other scheme", endpoint: "grpc://otel:4317"},
		{name: "no port", endpoint: "otel"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := node.DefaultConfig()
			cfg.OTLPEndpoint = tc.endpoint
			err := cfg.Validate()
			if tc.ok != (err == nil) {
				t.Fatalf("Validate: %v", err)
			}
			if err != nil && (!errors.Is(err, node.ErrConfig) || !strings.Contains(err.Error(), "otlp_endpoint")) {
				t.Fatalf("error %q does not name otlp_endpoint", err)
			}
		})
	}
}
