package node

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"

	"github.com/kvrouter/kvrouter/internal/telemetry"
	"github.com/kvrouter/kvrouter/node/frontend"
)

// serviceName is the node's OpenTelemetry service.name, unless
// OTEL_SERVICE_NAME says otherwise.
const serviceName = "kvrouter-node"

// tracing sets up span export from OTLPEndpoint and the OTEL_*
// environment (package telemetry), gives the frontend its tracer provider
// and returns what flushes and stops the export.
func (n *Node) tracing(ctx context.Context, fcfg *frontend.Config) (func(), error) {
	t, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: serviceName, Endpoint: n.cfg.OTLPEndpoint, Log: n.log,
		Attributes: []attribute.KeyValue{attribute.String("service.instance.id", n.cfg.NodeID), attribute.String("kvrouter.dc", n.cfg.DC)}})
	switch {
	case errors.Is(err, telemetry.ErrEndpoint):
		return nil, fmt.Errorf("%w: otlp_endpoint: %w", ErrConfig, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	fcfg.TracerProvider = t.Provider
	return func() {
		if err := t.Shutdown(); err != nil {
			n.log.Warn("flushing spans", "err", err)
		}
	}, nil
}
