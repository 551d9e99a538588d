package otlptest

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, its ids in hex as in traceparent.
type Span struct {
	Service string
	Name    string
	Kind    tracepb.Span_SpanKind
	TraceID string
	SpanID  string
	// ParentID is "" for a root span.
	ParentID string
	Attrs    map[string]string
}

// Collector receives spans over OTLP/gRPC (GRPCAddr) and OTLP/HTTP
// (HTTPURL, at /v1/traces).
type Collector struct {
	collectorpb.UnimplementedTraceServiceServer
	// GRPCAddr is host:port of the gRPC receiver.
	GRPCAddr string
	// HTTPURL is the base URL of the HTTP receiver.
	HTTPURL string

	gs *grpc.Server
	hs *http.Server
	wg sync.WaitGroup

	mu    sync.Mutex
	spans []Span
}

// Start starts a Collector on loopback ports; it is closed when the test
// ends.
func Start(t testing.TB) *Collector {
	t.Helper()
	c := &Collector{gs: grpc.NewServer()}
	collectorpb.RegisterTraceServiceServer(c.gs, c)
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = gl.Close()
		t.Fatal(err)
	}
	c.GRPCAddr, c.HTTPURL = gl.Addr().String(), "http://"+hl.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", c.serveHTTP)
	c.hs = &http.Server{Handler: mux}
	c.wg.Go(func() { _ = c.gs.Serve(gl) })
	c.wg.Go(func() { _ = c.hs.Serve(hl) })
	t.Cleanup(c.Close)
	return c
}

// Close stops both receivers.
func (c *Collector) Close() {
	c.gs.Stop()
	_ = c.hs.Close()
	c.wg.Wait()
}

// Export implements the OTLP/gRPC trace service.
func (c *Collector) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	c.add(req)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// serveHTTP is the OTLP/HTTP receiver (binary protobuf bodies).
func (c *Collector) serveHTTP(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(r.Body)
	var req collectorpb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(data, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.add(&req)
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// add keeps the spans of one export.
func (c *Collector) add(req *collectorpb.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		svc := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				svc = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, convert(svc, s))
			}
		}
	}
}

// convert flattens a span.
func convert(svc string, s *tracepb.Span) Span {
	out := Span{Service: svc, Name: s.GetName(), Kind: s.GetKind(), TraceID: hex.EncodeToString(s.GetTraceId()),
		SpanID: hex.EncodeToString(s.GetSpanId()), Attrs: map[string]string{}}
	if len(s.GetParentSpanId()) > 0 {
		out.ParentID = hex.EncodeToString(s.GetParentSpanId())
	}
	for _, kv := range s.GetAttributes() {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			out.Attrs[kv.GetKey()] = v.GetStringValue()
		default:
			out.Attrs[kv.GetKey()] = v.String()
		}
	}
	return out
}

// Spans returns a copy of the spans received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}
