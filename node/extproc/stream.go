package extproc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/node/selection"
)

// phase is where a stream is in its HTTP request's life.
type phase uint8

const (
	// awaitHeaders: nothing received yet.
	awaitHeaders phase = iota
	// readingBody: the request headers are in, the body is arriving.
	readingBody
	// answered: the request was routed (or fell through) and the
	// response's messages may follow.
	answered
	// finished: an immediate response was sent, or the response ended.
	finished
)

// exchange is one stream: one HTTP request and its response.
type exchange struct {
	s      *Server
	stream extprocv3.ExternalProcessor_ProcessServer
	phase  phase
	// reqMode and respMode are the body modes Envoy announced (NONE when
	// it did not say); deferHeaders: the request headers are answered
	// with the destination, once the body is in.
	reqMode, respMode filterv3.ProcessingMode_BodySendMode
	deferHeaders      bool
	// chunks counts STREAMED chunks to answer after deferred headers;
	// byTrailers: trailers, not a last body chunk, ended the body.
	chunks     int
	byTrailers bool
	ep         oaiedge.Endpoint
	header     http.Header
	body       []byte
	bodyDue    time.Time
	// subset is the gateway's subset hint (nil: none): the endpoints the
	// request may go to.
	subset   []string
	dec      *dispatch.Decision
	upstream error
	// firstChunk is set once the response's first body chunk arrived.
	firstChunk bool
}

// run serves the stream's messages until it ends, an immediate
// response ends the request, or the protocol is broken.
func (x *exchange) run() error {
	for {
		req, err := x.stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := x.handle(req); err != nil {
			return err
		}
	}
}

// handle serves one message.
func (x *exchange) handle(req *extprocv3.ProcessingRequest) error {
	if pc := req.GetProtocolConfig(); pc != nil && x.phase == awaitHeaders {
		x.reqMode, x.respMode = pc.GetRequestBodyMode(), pc.GetResponseBodyMode()
		x.deferHeaders = x.reqMode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED ||
			x.reqMode == filterv3.ProcessingMode_STREAMED && pc.GetSendBodyWithoutWaitingForHeaderResponse()
	}
	if x.phase < answered {
		if subset, ok := subsetHint(req.GetMetadataContext()); ok {
			x.subset = subset
		}
	}
	switch v := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return x.requestHeaders(v.RequestHeaders)
	case *extprocv3.ProcessingRequest_RequestBody:
		return x.requestBody(v.RequestBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return x.requestTrailers()
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return x.responseHeaders(v.ResponseHeaders)
	case *extprocv3.ProcessingRequest_ResponseBody:
		return x.responseBody(v.ResponseBody)
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return x.responseTrailers()
	}
	return x.violation("a message without a request phase")
}

// violation ends the stream for a message out of order.
func (x *exchange) violation(format string, args ...any) error {
	x.s.observe("client_error")
	x.phase = finished
	return status.Errorf(codes.InvalidArgument, "%v: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// requestHeaders reads the request's path and headers; a request without
// a body is refused or, off the inference endpoints, not routed.
func (x *exchange) requestHeaders(h *extprocv3.HttpHeaders) error {
	if x.phase != awaitHeaders {
		return x.violation("request headers after the request began")
	}
	x.header, x.ep = readHeaders(h)
	x.bodyDue = x.s.cfg.Now().Add(x.s.cfg.BodyTimeout)
	if x.ep == oaiedge.NumEndpoints {
		return x.refuse(fmt.Errorf("%w: %s is not an inference endpoint", oaiedge.ErrNotFound, x.header.Get(":path")))
	}
	if h.GetEndOfStream() {
		return x.refuse(fmt.Errorf("%w: POST %s needs a JSON body", ErrNoBody, x.ep.Path()))
	}
	x.phase = readingBody
	if x.deferHeaders {
		return nil
	}
	return x.stream.Send(requestHeaders(&extprocv3.CommonResponse{}, nil))
}

// requestBody buffers a chunk under the body bounds and routes the
// request at the body's end.
func (x *exchange) requestBody(b *extprocv3.HttpBody) error {
	if x.phase != readingBody {
		return x.violation("a request body chunk outside the request body")
	}
	switch {
	case int64(len(x.body))+int64(len(b.GetBody())) > x.s.cfg.MaxBodyBytes:
		return x.refuse(fmt.Errorf("%w: over %d bytes", oaiedge.ErrBodyTooLarge, x.s.cfg.MaxBodyBytes))
	case x.s.cfg.Now().After(x.bodyDue):
		return x.refuse(fmt.Errorf("%w: not in within %v", oaiedge.ErrBodyTimeout, x.s.cfg.BodyTimeout))
	}
	x.body = append(x.body, b.GetBody()...)
	if !b.GetEndOfStream() {
		return x.pendChunk()
	}
	return x.route()
}

// pendChunk answers a chunk that does not end the body: at once when
// the headers were answered (STREAMED), later when they wait for the
// decision; FULL_DUPLEX_STREAMED answers the whole body at its end.
func (x *exchange) pendChunk() error {
	switch {
	case x.reqMode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED:
		return nil
	case x.deferHeaders:
		x.chunks++
		return nil
	}
	return x.stream.Send(requestBody(&extprocv3.CommonResponse{}, nil))
}

// requestTrailers end a body that did not say it ended.
func (x *exchange) requestTrailers() error {
	switch x.phase {
	case readingBody:
		x.byTrailers = true
		if err := x.route(); err != nil || x.phase == finished {
			return err
		}
	case answered:
	default:
		return x.violation("request trailers outside the request")
	}
	return x.stream.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}})
}

// route decides once the body is in and answers with the destination in
// the answers the body mode calls for.
func (x *exchange) route() error {
	start := x.s.cfg.Now()
	dec, err := x.decide(start)
	if err != nil {
		return x.refuse(err)
	}
	endpoint, prefill, err := endpoints(dec)
	if err != nil {
		dec.Done(err)
		return x.refuse(fmt.Errorf("%w: %w", dispatch.ErrNoEngine, err))
	}
	x.book(dec)
	x.s.observe("ok")
	if x.s.m != nil {
		x.s.m.Decision.WithLabelValues(metrics.EdgeExtProc).Observe(x.s.cfg.Now().Sub(start).Seconds())
	}
	return x.answer(endpoint, prefill)
}

// endpoints are the host:port of dec's engine and of its prefill engine
// ("" for an aggregated decision).
func endpoints(dec *dispatch.Decision) (endpoint, prefill string, err error) {
	if endpoint, err = dispatch.HostPort(dec.EndpointURL); err != nil || dec.Prefill == nil {
		return endpoint, "", err
	}
	prefill, err = dispatch.HostPort(dec.Prefill.EndpointURL)
	return endpoint, prefill, err
}

// decide parses the body and routes it under the deadline.
func (x *exchange) decide(start time.Time) (*dispatch.Decision, error) {
	if !x.s.serving() {
		return nil, oaiedge.ErrNotReady
	}
	ctx, cancel := context.WithTimeout(x.stream.Context(), x.s.cfg.Deadline)
	defer cancel()
	req, release, err := x.s.reqs.OpenAI(requestID(x.header), x.ep, x.body, x.header, start)
	if err != nil {
		return nil, err
	}
	defer release()
	req.Subset = x.subset
	return x.s.router.Route(ctx, req)
}

// answer sends the destination (none: endpoint "") and a pair's prefill
// engine in the answers the body mode calls for, and the request body
// back under FULL_DUPLEX_STREAMED (not ending it when trailers follow).
func (x *exchange) answer(endpoint, prefill string) error {
	x.phase = answered
	defer func() { x.body = nil }()
	c, md := destination(endpoint, prefill)
	if !x.deferHeaders {
		return x.stream.Send(requestBody(c, md))
	}
	if err := x.stream.Send(requestHeaders(c, md)); err != nil {
		return err
	}
	if x.reqMode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
		return x.stream.Send(requestBody(streamedBody(x.body, !x.byTrailers), nil))
	}
	if !x.byTrailers {
		x.chunks++ // the last chunk
	}
	for ; x.chunks > 0; x.chunks-- {
		if err := x.stream.Send(requestBody(&extprocv3.CommonResponse{}, nil)); err != nil {
			return err
		}
	}
	return nil
}

// refuse answers a request that cannot be routed: at once with its
// error's status, or, under FailOpen for the router's own failures,
// without a destination.
func (x *exchange) refuse(err error) error {
	c := x.s.errs.Classify(err)
	if x.s.cfg.FailOpen && fallsThrough(c) && !x.subsetUnmet(err) && x.phase == readingBody {
		x.s.log.Debug("no destination: the gateway's balancing applies", "err", err)
		x.s.observe(metrics.OutcomeFellThrough)
		return x.answer("", "")
	}
	x.s.observe(selection.Outcome(c.Status))
	x.phase = finished
	x.body = nil
	return x.stream.Send(immediate(c, err))
}

// subsetUnmet reports a request the subset hint left without an engine:
// the protocol's answer is 503, even under FailOpen, since the gateway's
// own balancing would not keep to the subset.
func (x *exchange) subsetUnmet(err error) bool {
	return x.subset != nil && errors.Is(err, dispatch.ErrNoEngine)
}

// book keeps the decision until the response ends.
func (x *exchange) book(dec *dispatch.Decision) {
	x.dec = dec
	if x.s.m != nil {
		x.s.m.Reservations.Inc()
	}
}

// responseHeaders notes a server error, and ends a response without a
// body.
func (x *exchange) responseHeaders(h *extprocv3.HttpHeaders) error {
	if x.phase != answered {
		return x.violation("response headers before the request was answered")
	}
	if code, err := strconv.Atoi(header(h, ":status")); err == nil && code >= 500 {
		x.upstream = fmt.Errorf("%w: %d", ErrUpstreamStatus, code)
	}
	return x.respond(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}}, h.GetEndOfStream())
}

// responseBody ends the prefill load at the first chunk, as a proxied
// request's first token does (a pair's prefill hop, which the decode
// engine's sidecar ran before it decoded, ends with it), and the booking
// at the last.
func (x *exchange) responseBody(b *extprocv3.HttpBody) error {
	if x.phase != answered {
		return x.violation("a response body chunk before the request was answered")
	}
	if !x.firstChunk && x.dec != nil {
		x.firstChunk = true
		if x.dec.Prefill != nil {
			x.dec.Prefill.Done(nil)
		}
		x.dec.OnFirstToken()
	}
	c := &extprocv3.CommonResponse{}
	if x.respMode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
		c = streamedBody(b.GetBody(), b.GetEndOfStream())
	}
	return x.respond(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{Response: c}}}, b.GetEndOfStream())
}

// responseTrailers end the response.
func (x *exchange) responseTrailers() error {
	if x.phase != answered {
		return x.violation("response trailers before the request was answered")
	}
	return x.respond(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}}, true)
}

// respond sends the answer to a response message, and frees the booking
// when the message ends the response.
func (x *exchange) respond(r *extprocv3.ProcessingResponse, last bool) error {
	err := x.stream.Send(r)
	if err == nil && last {
		x.end(nil)
	}
	return err
}

// end frees the booking once: err is why the stream ended early (nil
// when the response completed), else the engine's server error.
func (x *exchange) end(err error) {
	if x.dec == nil {
		if x.phase < answered && err != nil {
			x.s.observe("canceled")
		}
		return
	}
	if err == nil {
		err = x.upstream
	} else if x.phase != finished {
		err = fmt.Errorf("extproc: stream ended before the response: %w", err)
	}
	x.dec.Done(err)
	x.dec = nil
	if x.s.m != nil {
		x.s.m.Reservations.Dec()
	}
}

// readHeaders is the request's headers, pseudo-headers included, and
// its inference endpoint (NumEndpoints when the method and path are not
// one).
func readHeaders(h *extprocv3.HttpHeaders) (http.Header, oaiedge.Endpoint) {
	out := make(http.Header, len(h.GetHeaders().GetHeaders()))
	for _, hv := range h.GetHeaders().GetHeaders() {
		out.Add(hv.GetKey(), headerValue(hv.GetValue(), hv.GetRawValue()))
	}
	path, _, _ := strings.Cut(out.Get(":path"), "?")
	if out.Get(":method") == http.MethodPost {
		for _, ep := range oaiedge.Endpoints {
			if ep.Path() == path {
				return out, ep
			}
		}
	}
	return out, oaiedge.NumEndpoints
}

// header is one header of h.
func header(h *extprocv3.HttpHeaders, key string) string {
	for _, hv := range h.GetHeaders().GetHeaders() {
		if hv.GetKey() == key {
			return headerValue(hv.GetValue(), hv.GetRawValue())
		}
	}
	return ""
}

// headerValue is a header's value: Envoy sends raw_value, older
// versions value.
func headerValue(v string, raw []byte) string {
	if len(raw) > 0 {
		return string(raw)
	}
	return v
}

// requestID is Envoy's x-request-id when usable, else a new id; it names
// the request's booking and must be unique while it runs.
func requestID(h http.Header) string {
	id := h.Get("X-Request-Id")
	if id == "" || selection.CheckRequestID(id) != nil {
		return "epp-" + strconv.FormatUint(nextID.Add(1), 36) + idSuffix
	}
	return id
}

// nextID and idSuffix make the picker's own request ids unique within
// the process and across nodes and restarts.
var (
	nextID   atomic.Uint64
	idSuffix = func() string {
		var b [6]byte
		_, _ = rand.Read(b[:])
		return "-" + hex.EncodeToString(b[:])
	}()
)
