package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// envoy drives the endpoint picker as Envoy's ext_proc filter does: one
// stream per HTTP request, the request's headers and body in the body
// mode it announces, then the response's.
type envoy struct {
	t      *testing.T
	stream extprocv3.ExternalProcessor_ProcessClient
	mode   filterv3.ProcessingMode_BodySendMode
	cancel context.CancelFunc
	// md is the filter metadata sent with the request headers (a subset
	// hint), nil for none.
	md *corev3.Metadata
	// routed is the answer that carried the destination.
	routed *extprocv3.CommonResponse
}

func newEnvoy(t *testing.T, f *fleet, mode filterv3.ProcessingMode_BodySendMode) *envoy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	s, err := extprocv3.NewExternalProcessorClient(dial(t, f.node.ExtProcAddr().String())).Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &envoy{t: t, stream: s, mode: mode, cancel: cancel}
}

func (e *envoy) send(r *extprocv3.ProcessingRequest) {
	e.t.Helper()
	if err := e.stream.Send(r); err != nil {
		e.t.Fatal(err)
	}
}

func (e *envoy) recv() *extprocv3.ProcessingResponse {
	e.t.Helper()
	r, err := e.stream.Recv()
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// headers sends the request headers of POST path, with the body mode in
// the protocol configuration as Envoy 1.33+ does.
func (e *envoy) headers(path string, extra map[string]string, eos bool) {
	hs := []*corev3.HeaderValue{{Key: ":method", RawValue: []byte("POST")}, {Key: ":path", RawValue: []byte(path)},
		{Key: "content-type", RawValue: []byte("application/json")}}
	for k, v := range extra {
		hs = append(hs, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
	}
	e.send(&extprocv3.ProcessingRequest{
		MetadataContext: e.md,
		ProtocolConfig:  &extprocv3.ProtocolConfiguration{RequestBodyMode: e.mode, ResponseBodyMode: e.mode},
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
			Headers: &corev3.HeaderMap{Headers: hs}, EndOfStream: eos}}})
}

func (e *envoy) body(chunk []byte, eos bool) {
	e.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: chunk, EndOfStream: eos}}})
}

// request sends a whole request in chunks of n bytes, as the mode says,
// and returns the endpoint the picker chose (or its immediate response).
func (e *envoy) request(body []byte, n int, hdrs map[string]string) (string, *extprocv3.ImmediateResponse) {
	e.t.Helper()
	e.headers("/v1/completions", hdrs, false)
	duplex := e.mode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	if !duplex { // Envoy waits for the headers' answer
		if r := e.recv(); r.GetRequestHeaders() == nil {
			e.t.Fatalf("headers answered with %v", r)
		}
	}
	if e.mode == filterv3.ProcessingMode_BUFFERED {
		n = len(body)
	}
	for len(body) > n {
		e.body(body[:n], false)
		body = body[n:]
		if e.mode == filterv3.ProcessingMode_STREAMED && e.recv().GetRequestBody() == nil {
			e.t.Fatal("a streamed chunk not answered")
		}
	}
	e.body(body, true)
	r := e.recv()
	if im := r.GetImmediateResponse(); im != nil {
		return "", im
	}
	c := r.GetRequestBody().GetResponse()
	if duplex {
		c = r.GetRequestHeaders().GetResponse()
	}
	e.routed = c
	return e.destination(c, r), nil
}

// destination checks that the header mutation and the dynamic metadata
// name the same endpoint, and returns it ("" for none).
func (e *envoy) destination(c *extprocv3.CommonResponse, r *extprocv3.ProcessingResponse) string {
	e.t.Helper()
	var header string
	for _, h := range c.GetHeaderMutation().GetSetHeaders() {
		if h.GetHeader().GetKey() == "x-gateway-destination-endpoint" {
			header = string(h.GetHeader().GetRawValue())
		}
	}
	md := r.GetDynamicMetadata().GetFields()["envoy.lb"].GetStructValue().GetFields()["x-gateway-destination-endpoint"].GetStringValue()
	if header != md || (header != "") != c.GetClearRouteCache() {
		e.t.Fatalf("header %q, metadata %q, clear route cache %v", header, md, c.GetClearRouteCache())
	}
	return header
}

// respond plays the engine's answer through the picker.
func (e *envoy) respond(status string, chunks ...string) {
	e.t.Helper()
	e.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
		Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", RawValue: []byte(status)}}}}}})
	if e.recv().GetResponseHeaders() == nil {
		e.t.Fatal("response headers not answered")
	}
	for i, c := range chunks {
		e.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
			Body: []byte(c), EndOfStream: i == len(chunks)-1}}})
		r := e.recv().GetResponseBody()
		if r == nil {
			e.t.Fatal("response body not answered")
		}
		if e.mode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED && string(r.GetResponse().GetBodyMutation().GetStreamedResponse().GetBody()) != c {
			e.t.Fatalf("full duplex: chunk %q not sent back", c)
		}
	}
	_ = e.stream.CloseSend()
}

func completionBody(tokens []int) []byte {
	b, _ := json.Marshal(map[string]any{"model": model, "prompt": tokens, "max_tokens": 4, "stream": true})
	return b
}

// pickerFleet is a fleet whose node serves the picker.
func pickerFleet(t *testing.T, engines int, tweak func(*node.Config)) *fleet {
	return selectFleet(t, engines, tweak)
}

// TestExtProcPicksAndBooksInEveryBodyMode: in BUFFERED, STREAMED and
// FULL_DUPLEX_STREAMED modes the picker answers with
// an engine's host:port in the header and the metadata, keeps the load
// booked while the response streams, and frees it at its end.
func TestExtProcPicksAndBooksInEveryBodyMode(t *testing.T) {
	f := pickerFleet(t, 2, nil)
	endpoints := f.engineEndpoints()
	for _, mode := range []filterv3.ProcessingMode_BodySendMode{filterv3.ProcessingMode_BUFFERED,
		filterv3.ProcessingMode_STREAMED, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newEnvoy(t, f, mode)
			body := completionBody(seq(1, 300))
			dest, im := e.request(body, 97, nil)
			if im != nil || !endpoints[dest] {
				t.Fatalf("destination %q (engines %v), immediate %v", dest, endpoints, im)
			}
			if mode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
				r := e.recv().GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
				if string(r.GetBody()) != string(body) || !r.GetEndOfStream() {
					t.Fatalf("body sent back: %q eos %v", r.GetBody(), r.GetEndOfStream())
				}
			}
			f.waitReservations(1)
			e.respond("200", "data: {}\n\n", "data: [DONE]\n\n")
			f.waitReservations(0)
		})
	}
}

// TestExtProcSessionSticks: requests of one session go to one engine,
// across streams, through the node's session bindings.
func TestExtProcSessionSticks(t *testing.T) {
	f := pickerFleet(t, 3, nil)
	var first string
	for i := range 4 {
		e := newEnvoy(t, f, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED)
		dest, im := e.request(completionBody(seq(1000*(i+1), 64)), 1<<20, map[string]string{"x-session-id": "conv-1"})
		if im != nil {
			t.Fatalf("request %d: %v", i, im)
		}
		e.recv() // the body sent back
		e.respond("200", "data: [DONE]\n\n")
		if i == 0 {
			first = dest
		} else if dest != first {
			t.Fatalf("request %d went to %s, the session's first to %s", i, dest, first)
		}
	}
}

// TestExtProcClientDisconnectMidBody: a stream cancelled in the middle of
// the body books nothing and leaves the picker serving.
func TestExtProcClientDisconnectMidBody(t *testing.T) {
	f := pickerFleet(t, 1, nil)
	e := newEnvoy(t, f, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED)
	e.headers("/v1/completions", nil, false)
	e.body([]byte(`{"model":"`+model+`","prompt":[1,2,`), false)
	e.cancel()
	f.waitMetric("kvrouter_selection_requests_total", 1) // counted as canceled
	next := newEnvoy(t, f, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED)
	if dest, im := next.request(completionBody(seq(1, 32)), 8, nil); dest == "" || im != nil {
		t.Fatalf("after a disconnect: %q %v", dest, im)
	}
	next.cancel() // mid-response: the booking is freed with the stream
	f.waitReservations(0)
}

// TestExtProcFailOpen: with fail-open, a request the node cannot route
// for its own reasons (no engine of the configured block size) goes on
// without a destination; without it, it gets 503.
func TestExtProcFailOpen(t *testing.T) {
	// One subtest per mode, so that each fleet stops (and its leak check
	// runs) before the next starts: a fleet still running would start
	// goroutines, such as a NATS subscription's, that the next fleet's
	// leak check does not know.
	for _, open := range []bool{true, false} {
		t.Run(fmt.Sprintf("fail-open=%v", open), func(t *testing.T) {
			f := pickerFleet(t, 1, func(c *node.Config) {
				c.Dispatch.BlockSize = 64 // the engines' is 16: none is a candidate
				c.Selection.ExtProc.FailOpen = open
			})
			e := newEnvoy(t, f, filterv3.ProcessingMode_BUFFERED)
			dest, im := e.request(completionBody(seq(1, 128)), 0, nil)
			switch {
			case open && (dest != "" || im != nil):
				t.Fatalf("fail-open: destination %q, immediate %v", dest, im)
			case !open && im.GetStatus().GetCode() != 503:
				t.Fatalf("fail-closed: %v", im)
			}
		})
	}
}

// TestExtProcBadInputIsRefusedClearly: messages out of order end the
// stream with INVALID_ARGUMENT; bodies that are too large, malformed or
// for a path that is no inference endpoint get an immediate 4xx; the
// node keeps serving.
func TestExtProcBadInputIsRefusedClearly(t *testing.T) {
	f := pickerFleet(t, 1, func(c *node.Config) { c.Selection.ExtProc.MaxBodyBytes = 4096 })
	t.Run("body before headers", func(t *testing.T) {
		e := newEnvoy(t, f, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED)
		e.body([]byte("{}"), true)
		if _, err := e.stream.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("got %v, want INVALID_ARGUMENT", err)
		}
	})
	t.Run("response before the request ended", func(t *testing.T) {
		e := newEnvoy(t, f, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED)
		e.headers("/v1/completions", nil, false)
		e.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{}}})
		if _, err := e.stream.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("got %v, want INVALID_ARGUMENT", err)
		}
	})
	for _, tc := range []struct {
		name, path string
		body       []byte
		want       int32
	}{
		{name: "oversized body", path: "/v1/completions", body: completionBody(seq(1, 2000)), want: 413},
		{name: "malformed body", path: "/v1/completions", body: []byte(`{"model":`), want: 400},
		{name: "unknown model", path: "/v1/completions", body: []byte(`{"model":"nope","prompt":"x"}`), want: 404},
		{name: "not an inference path", path: "/v1/nope", want: 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvoy(t, f, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED)
			e.headers(tc.path, nil, tc.body == nil)
			if tc.body != nil {
				e.body(tc.body, true)
			}
			im := e.recv().GetImmediateResponse()
			if int32(im.GetStatus().GetCode()) != tc.want || !strings.Contains(string(im.GetBody()), `"error"`) {
				t.Fatalf("immediate response %v, want %d with an OpenAI error body", im, tc.want)
			}
		})
	}
	hc := healthpb.NewHealthClient(dial(t, f.node.ExtProcAddr().String()))
	for _, svc := range []string{"liveness", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor"} {
		r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %s: %v %v", svc, r, err)
		}
	}
}

// engineEndpoints are the host:port of every engine of the fleet, as
// Selects pinned to each report them.
func (f *fleet) engineEndpoints() map[string]bool {
	f.t.Helper()
	out := map[string]bool{}
	for id := range f.engines {
		out[f.engineEndpoint(id)] = true
	}
	return out
}

// engineEndpoint is engine id's host:port, as a Select pinned to it
// reports it.
func (f *fleet) engineEndpoint(id uint64) string {
	f.t.Helper()
	return f.engineWorker(id).GetEndpoint()
}

// subsetHint is the filter metadata of a gateway's subset hint.
func subsetHint(endpoints ...string) *corev3.Metadata {
	vs := make([]*structpb.Value, len(endpoints))
	for i, e := range endpoints {
		vs[i] = structpb.NewStringValue(e)
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.lb.subset_hint": {Fields: map[string]*structpb.Value{
		"x-gateway-destination-endpoint-subset": structpb.NewListValue(&structpb.ListValue{Values: vs})}}}}
}

// TestExtProcSubsetHint: with the gateway's subset hint the picker
// chooses only among the endpoints it lists: a subset that leaves out the
// engine caching the prompt moves the choice to one it lists; an empty
// subset, or one naming no engine, is a 503 ImmediateResponse, also under
// fail-open; without a hint the whole pool is chosen from.
func TestExtProcSubsetHint(t *testing.T) {
	f := pickerFleet(t, 3, func(c *node.Config) { c.Selection.ExtProc.FailOpen = true })
	prompt := seq(7000, 512)
	cacher, _ := f.complete(prompt)
	f.waitCached(prompt, cacher)
	id, _ := strconv.ParseUint(strings.Split(cacher, "/")[0], 10, 64)
	var others []string
	for o := range f.engines {
		if o != id {
			others = append(others, f.engineEndpoint(o))
		}
	}
	pick := func(md *corev3.Metadata) (string, *extprocv3.ImmediateResponse) {
		e := newEnvoy(t, f, filterv3.ProcessingMode_BUFFERED)
		e.md = md
		dest, im := e.request(completionBody(prompt), 0, nil)
		if im == nil {
			e.respond("200", "data: [DONE]\n\n")
			f.waitReservations(0)
		}
		return dest, im
	}
	if dest, im := pick(nil); dest != f.engineEndpoint(id) {
		t.Fatalf("without a hint: %q %v, want the caching engine %s", dest, im, f.engineEndpoint(id))
	}
	if dest, im := pick(subsetHint(others...)); dest == "" || !slices.Contains(others, dest) {
		t.Fatalf("subset %q: %q %v", others, dest, im)
	}
	if dest, im := pick(subsetHint(others[1])); dest != others[1] {
		t.Fatalf("subset %q: %q %v", others[1], dest, im)
	}
	for _, md := range []*corev3.Metadata{subsetHint(), subsetHint("10.255.255.1:9")} {
		if dest, im := pick(md); im.GetStatus().GetCode() != 503 || dest != "" {
			t.Errorf("subset %v: destination %q, immediate %v; want 503", md, dest, im)
		}
	}
}

// setHeader is the value the routed answer sets header to, "" if none.
func (e *envoy) setHeader(key string) string {
	for _, h := range e.routed.GetHeaderMutation().GetSetHeaders() {
		if h.GetHeader().GetKey() == key {
			return string(h.GetHeader().GetRawValue())
		}
	}
	return ""
}

// TestExtProcDisaggPair: for a disaggregated model the picker sends the
// request to the decode engine and names the prefill engine caching the
// prompt in x-prefiller-host-port, over the one the client sent, for the
// decode engine's sidecar; both hops are booked, the prefill hop until
// the response's first chunk and the decode hop until its end. An
// aggregated answer removes a prefill header the client sent.
func TestExtProcDisaggPair(t *testing.T) {
	f := selectDisaggFleet(t)
	prompt := seq(1000, 256)
	cacher := f.cachedPrefill(prompt)
	sel, err := selectClient(t, f).Select(context.Background(), &kvrpb.SelectRequest{Model: model,
		Prompt: idsPrompt(append(seq(1000, 240), seq(90000, 64)...))})
	if err != nil {
		t.Fatal(err)
	}
	prefill := sel.GetPrefillWorker()
	if !strings.HasPrefix(cacher, strconv.FormatUint(prefill.GetEngineId(), 10)+"/") {
		t.Fatalf("Select's prefill engine %v, the cache is on %s", prefill, cacher)
	}
	decodes := map[string]*kvrpb.SelectWorker{}
	for _, id := range []uint64{3, 4} {
		w := f.engineWorker(id)
		decodes[w.GetEndpoint()] = w
	}
	e := newEnvoy(t, f, filterv3.ProcessingMode_BUFFERED)
	dest, im := e.request(completionBody(append(seq(1000, 240), seq(90000, 64)...)), 0,
		map[string]string{"x-prefiller-host-port": "169.254.169.254:80"})
	if im != nil || decodes[dest] == nil {
		t.Fatalf("destination %q (decode engines %v), immediate %v", dest, decodes, im)
	}
	if got := e.setHeader("x-prefiller-host-port"); got != prefill.GetEndpoint() {
		t.Fatalf("x-prefiller-host-port %q, want the caching prefill engine's %q", got, prefill.GetEndpoint())
	}
	if pt, _ := f.activeLoad(prefill, "prefill"); pt <= 0 {
		t.Fatalf("prefill engine's booked prefill tokens %v", pt)
	}
	if _, db := f.activeLoad(decodes[dest], "decode"); db <= 0 {
		t.Fatalf("decode engine's booked blocks %v", db)
	}
	e.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
		Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", RawValue: []byte("200")}}}}}})
	e.recv()
	e.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
		Body: []byte("data: {}\n\n")}}})
	e.recv()
	if pt, _ := f.activeLoad(prefill, "prefill"); pt != 0 {
		t.Fatalf("prefill engine's booked prefill tokens %v after the first chunk", pt)
	}
	e.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
		Body: []byte("data: [DONE]\n\n"), EndOfStream: true}}})
	e.recv()
	f.waitReservations(0)
	if _, db := f.activeLoad(decodes[dest], "decode"); db != 0 {
		t.Fatalf("decode engine's booked blocks %v after the response", db)
	}

	agg := pickerFleet(t, 1, nil)
	e = newEnvoy(t, agg, filterv3.ProcessingMode_BUFFERED)
	if _, im := e.request(completionBody(seq(1, 64)), 0, map[string]string{"x-prefiller-host-port": "169.254.169.254:80"}); im != nil ||
		!slices.Contains(e.routed.GetHeaderMutation().GetRemoveHeaders(), "x-prefiller-host-port") || e.setHeader("x-prefiller-host-port") != "" {
		t.Fatalf("aggregated answer %v, immediate %v: the client's prefill header stays", e.routed, im)
	}
	e.respond("200", "data: [DONE]\n\n")
}

// engineWorker is engine id as a Select pinned to it names it.
func (f *fleet) engineWorker(id uint64) *kvrpb.SelectWorker {
	f.t.Helper()
	sel, err := selectClient(f.t, f).Select(context.Background(), &kvrpb.SelectRequest{Model: model, Prompt: tokenPrompt(1, 16),
		Headers: map[string]string{"X-Worker-Instance-Id": strconv.FormatUint(id, 10)}})
	if err != nil {
		f.t.Fatal(err)
	}
	return sel.GetWorker()
}
