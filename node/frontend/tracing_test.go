package frontend

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/kvrouter/kvrouter/internal/waittest"
)

// incoming is a client's traceparent.
const (
	incomingTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	incomingParent = "00f067aa0ba902b7"
	incoming       = "00-" + incomingTrace + "-" + incomingParent + "-01"
)

// TestTraceContextInAndOut checks the span tree of one completion: the
// HTTP server span is a child of the client's traceparent, the request
// span a child of it, the routing decision and the engine call children of
// the request span, and the engine receives the engine call's context.
func TestTraceContextInAndOut(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ts, _, e := setup(t, Config{TracerProvider: tp}, nil)
	if resp := post(t, ts, "/v1/completions", `{"model":"m","prompt":[1,2]}`, map[string]string{"traceparent": incoming}); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	spans := waitSpans(t, rec, 4)
	server, request := spans["POST /v1/completions"], spans[spanRequest+"/v1/completions"]
	route, upstream := spans[spanRoute], spans[spanUpstream]
	if server == nil || request == nil || route == nil || upstream == nil {
		t.Fatalf("spans %v, want the server, request, route and upstream spans", spans)
	}
	if got := server.SpanContext().TraceID().String(); got != incomingTrace || server.Parent().SpanID().String() != incomingParent ||
		server.SpanKind() != trace.SpanKindServer {
		t.Fatalf("server span in trace %s, parent %s, kind %v; want the client's", got, server.Parent().SpanID(), server.SpanKind())
	}
	for _, c := range []struct {
		child, parent sdktrace.ReadOnlySpan
	}{{request, server}, {route, request}, {upstream, request}} {
		if c.child.Parent().SpanID() != c.parent.SpanContext().SpanID() {
			t.Errorf("%s: parent %s, want %s", c.child.Name(), c.child.Parent().SpanID(), c.parent.Name())
		}
	}
	if upstream.SpanKind() != trace.SpanKindClient {
		t.Errorf("upstream span kind %v", upstream.SpanKind())
	}
	want := "00-" + incomingTrace + "-" + upstream.SpanContext().SpanID().String() + "-01"
	if got := e.traceparents[0]; got != want {
		t.Errorf("engine got traceparent %q, want %q", got, want)
	}
	wantAttrs(t, request, map[attribute.Key]string{"gen_ai.request.model": "m", "kvrouter.worker": "7/1", "kvrouter.cached_blocks": "2"})
	wantAttrs(t, route, map[attribute.Key]string{"kvrouter.worker": "7/1", "kvrouter.cached_blocks": "2"})
}

// TestTraceContextPassedOnWithoutTracing checks that a node that records
// no spans still hands the client's trace context to the engine.
func TestTraceContextPassedOnWithoutTracing(t *testing.T) {
	ts, _, e := setup(t, Config{TracerProvider: noop.NewTracerProvider()}, nil)
	if resp := post(t, ts, "/v1/completions", `{"model":"m","prompt":[1,2]}`, map[string]string{"traceparent": incoming}); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := e.traceparents[0]; got != incoming {
		t.Fatalf("engine got traceparent %q, want the client's %q", got, incoming)
	}
}

// waitSpans waits for n ended spans and returns them by name.
func waitSpans(t *testing.T, rec *tracetest.SpanRecorder, n int) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	waittest.Until(t, 10*time.Second, fmt.Sprintf("%d spans ended", n), func() bool { return len(rec.Ended()) >= n })
	out := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		out[s.Name()] = s
	}
	return out
}

// wantAttrs fails unless span carries every attribute of want.
func wantAttrs(t *testing.T, span sdktrace.ReadOnlySpan, want map[attribute.Key]string) {
	t.Helper()
	for _, kv := range span.Attributes() {
		if v, ok := want[kv.Key]; ok && kv.Value.Emit() == v {
			delete(want, kv.Key)
		}
	}
	if len(want) != 0 {
		t.Errorf("%s: missing attributes %v in %v", span.Name(), want, span.Attributes())
	}
}
