package telemetry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/kvrouter/kvrouter/internal/freeport"
	"github.com/kvrouter/kvrouter/internal/telemetry"
	"github.com/kvrouter/kvrouter/internal/telemetry/otlptest"
	"github.com/kvrouter/kvrouter/internal/waittest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// incoming is the traceparent of a caller's span.
const (
	incomingTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	incomingParent = "00f067aa0ba902b7"
	incoming       = "00-" + incomingTrace + "-" + incomingParent + "-01"
)

// clearEnv unsets every variable the tests set, so that the machine's own
// OTEL_* environment does not leak in.
func clearEnv(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_SERVICE_NAME", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"} {
		t.Setenv(k, "")
	}
}

func TestSpansReachTheCollector(t *testing.T) {
	c := otlptest.Start(t)
	tests := []struct {
		name     string
		endpoint string
		env      map[string]string
	}{
		{name: "env grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + c.GRPCAddr, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
		{name: "env http", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": c.HTTPURL, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}},
		{name: "env traces endpoint and protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": c.HTTPURL + "/v1/traces", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}},
		{name: "option host:port", endpoint: c.GRPCAddr},
		{name: "option grpc url", endpoint: "http://" + c.GRPCAddr},
		{name: "option http url", endpoint: c.HTTPURL, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}},
		{name: "option wins over env endpoint", endpoint: c.GRPCAddr, env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			tr, err := telemetry.Setup(context.Background(), telemetry.Config{ServiceName: "svc-" + tc.name, Endpoint: tc.endpoint})
			if err != nil {
				t.Fatal(err)
			}
			if !tr.Enabled() {
				t.Fatal("tracing off")
			}
			emit(tr.Provider, tc.name)
			if err := tr.Shutdown(); err != nil {
				t.Fatal(err)
			}
			for _, s := range c.Spans() {
				if s.Name == tc.name {
					if s.Service != "svc-"+tc.name || s.TraceID != incomingTrace || s.ParentID != incomingParent {
						t.Fatalf("span %+v: want service svc-%s, trace %s, parent %s", s, tc.name, incomingTrace, incomingParent)
					}
					return
				}
			}
			t.Fatalf("span %q not received; got %+v", tc.name, c.Spans())
		})
	}
}

// emit ends one span named name, child of the incoming traceparent.
func emit(tp trace.TracerProvider, name string) {
	ctx := telemetry.Propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": incoming})
	_, span := tp.Tracer("test").Start(ctx, name)
	span.End()
}

func TestTracingOffUnlessAskedFor(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string
		env      map[string]string
	}{
		{name: "nothing set"},
		{name: "sdk disabled", endpoint: "127.0.0.1:4317", env: map[string]string{"OTEL_SDK_DISABLED": "true"}},
		{name: "exporter none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			tr, err := telemetry.Setup(context.Background(), telemetry.Config{ServiceName: "svc", Endpoint: tc.endpoint})
			if err != nil {
				t.Fatal(err)
			}
			if tr.Enabled() {
				t.Fatal("tracing on")
			}
			_ = tr.Shutdown()
		})
	}
}

func TestParseEndpoint(t *testing.T) {
	tests := []struct {
		name, in, protocol string
		want               telemetry.Endpoint
		err                bool
	}{
		{name: "host:port", in: "otel:4317", want: telemetry.Endpoint{URL: "http://otel:4317", Protocol: "grpc"}},
		{name: "grpc url", in: "https://otel:4317", want: telemetry.Endpoint{URL: "https://otel:4317", Protocol: "grpc"}},
		{name: "http base url", in: "http://otel:4318", protocol: "http/protobuf", want: telemetry.Endpoint{URL: "http://otel:4318/v1/traces", Protocol: "http/protobuf"}},
		{name: "http url with path", in: "https://otel/x/traces", protocol: "http/protobuf", want: telemetry.Endpoint{URL: "https://otel/x/traces", Protocol: "http/protobuf"}},
		{name: "no port", in: "otel", err: true},
		{name: "empty host", in: ":4317", err: true},
		{name: "other scheme", in: "grpc://otel:4317", err: true},
		{name: "url without host", in: "http://", err: true},
		{name: "http/json", in: "http://otel:4318", protocol: "http/json", err: true},
		{name: "empty", in: "", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := telemetry.ParseEndpoint(tc.in, tc.protocol)
			if tc.err {
				if !errors.Is(err, telemetry.ErrEndpoint) || !strings.Contains(err.Error(), "OTLP") {
					t.Fatalf("ParseEndpoint(%q) = %+v, %v; want ErrEndpoint", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseEndpoint(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestSetupRefusesABadEndpoint(t *testing.T) {
	clearEnv(t)
	if _, err := telemetry.Setup(context.Background(), telemetry.Config{Endpoint: "ftp://otel:21"}); !errors.Is(err, telemetry.ErrEndpoint) {
		t.Fatalf("Setup = %v, want ErrEndpoint", err)
	}
}

// syncBuffer is a log destination safe for the exporter's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestExportErrorsAreLogged(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "300")
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	addr, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := telemetry.Setup(context.Background(), telemetry.Config{ServiceName: "svc", Endpoint: addr, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	emit(tr.Provider, "lost")
	_ = tr.Shutdown()
	waittest.UntilNil(t, 10*time.Second, "the export error is logged", func() error {
		if out := buf.String(); !strings.Contains(out, "spans not exported") {
			return fmt.Errorf("log:\n%s", out)
		}
		return nil
	})
}
