package service_test

import (
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/kvrouter/kvrouter/internal/telemetry/otlptest"
)

// TestSpansReachACollectorByTheOTELEnvironment: with nothing but the
// standard OTEL_* variables set, a request that carries a client's
// traceparent, enters DC a's gateway and is forwarded to DC b (the home of
// its session) leaves one linked trace at an OTLP/gRPC collector: a's
// gateway under the client's span, b's gateway under a's forward, b's
// router node under b's forward, with the node's routing decision and
// engine call inside.
func TestSpansReachACollectorByTheOTELEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("two DCs with router clusters, relays and engines; run without -short")
	}
	c := otlptest.Start(t)
	for k, v := range map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + c.GRPCAddr, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_SERVICE_NAME": "", "OTEL_TRACES_EXPORTER": "", "OTEL_SDK_DISABLED": ""} {
		t.Setenv(k, v)
	}
	const trace, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	a, b := startFederation(t, 5*time.Millisecond)
	session := homedIn(b.name, "traced")
	if dc := completeVia(t, a, session, tokens(9, 2*blockSize), map[string]string{"traceparent": "00-" + trace + "-" + parent + "-01"}); dc != b.name {
		t.Fatalf("served by %s, want %s (the session's home)", dc, b.name)
	}
	var tr traceView
	deadline := time.Now().Add(10 * time.Second)
	for tr = newTraceView(c.Spans(), trace); !tr.complete(); tr = newTraceView(c.Spans(), trace) {
		if time.Now().After(deadline) {
			for _, s := range tr.spans {
				t.Logf("%s %s kind %v span %s parent %s", s.Service, s.Name, s.Kind, s.SpanID, s.ParentID)
			}
			t.Fatalf("found %d of 4 hops of the trace", tr.found)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tr.gatewayA.Service != "kvrouter-relay" || tr.nodeB.Service != "kvrouter-node" {
		t.Errorf("services %q and %q, want kvrouter-relay and kvrouter-node", tr.gatewayA.Service, tr.nodeB.Service)
	}
	if tr.gatewayA.ParentID != parent {
		t.Errorf("a's gateway span has parent %q, want the client's %q", tr.gatewayA.ParentID, parent)
	}
}

// traceView finds the spans of one forwarded request's trace.
type traceView struct {
	spans []otlptest.Span
	// gatewayA and gatewayB are the HTTP server spans of the gateways,
	// nodeB that of the router node.
	gatewayA, gatewayB, nodeB otlptest.Span
	found                     int
}

// newTraceView walks the trace from the client's span down.
func newTraceView(all []otlptest.Span, trace string) traceView {
	var v traceView
	for _, s := range all {
		if s.TraceID == trace {
			v.spans = append(v.spans, s)
		}
	}
	// a's server span is the child of the client's span; each hop's server
	// span is the child of the previous hop's forward span.
	server := func(svc, parent string) (otlptest.Span, bool) {
		for _, s := range v.spans {
			if s.Kind == tracepb.Span_SPAN_KIND_SERVER && s.Service == svc && s.ParentID == parent {
				return s, true
			}
		}
		return otlptest.Span{}, false
	}
	ok := false
	if v.gatewayA, ok = server("kvrouter-relay", "00f067aa0ba902b7"); !ok {
		return v
	}
	v.found++
	if v.gatewayB, ok = server("kvrouter-relay", v.below(v.gatewayA, "kvrouter.gateway.forward")); !ok {
		return v
	}
	v.found++
	if v.nodeB, ok = server("kvrouter-node", v.below(v.gatewayB, "kvrouter.gateway.forward")); !ok {
		return v
	}
	v.found++
	if v.below(v.nodeB, "kvrouter.route") != "" && v.below(v.nodeB, "kvrouter.upstream") != "" {
		v.found++
	}
	return v
}

// below returns the id of the span named name below root in root's own
// process (the walk stops at the next hop's server span), "" if none.
func (v traceView) below(root otlptest.Span, name string) string {
	below := map[string]bool{root.SpanID: true}
	for changed := true; changed; {
		changed = false
		for _, s := range v.spans {
			if below[s.ParentID] && !below[s.SpanID] && s.Kind != tracepb.Span_SPAN_KIND_SERVER {
				below[s.SpanID], changed = true, true
			}
		}
	}
	for _, s := range v.spans {
		if s.Name == name && below[s.SpanID] && s.SpanID != root.SpanID {
			return s.SpanID
		}
	}
	return ""
}

// complete reports whether every hop was found.
func (v traceView) complete() bool { return v.found == 4 }
