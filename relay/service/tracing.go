package service

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"

	"github.com/kvrouter/kvrouter/internal/telemetry"
)

// serviceName is the relay's OpenTelemetry service.name, unless
// OTEL_SERVICE_NAME says otherwise.
const serviceName = "kvrouter-relay"

// setupTracing builds the gateway's tracer provider from OTLPEndpoint and
// the OTEL_* environment (package telemetry); errors name the option.
func (r *Relay) setupTracing() (*telemetry.Tracing, error) {
	t, err := telemetry.Setup(context.Background(), telemetry.Config{ServiceName: serviceName, Endpoint: r.cfg.OTLPEndpoint,
		Log: r.log, Attributes: []attribute.KeyValue{attribute.String("service.instance.id", r.cfg.Name), attribute.String("kvrouter.dc", r.cfg.DC)}})
	switch {
	case errors.Is(err, telemetry.ErrEndpoint):
		return nil, fmt.Errorf("%w: otlp_endpoint: %w", ErrConfig, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return t, nil
}
