package frontend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// MaxResponseBytes caps a non-streaming engine response, which is buffered
// to read its usage and set Content-Length. A completion with prompt log
// probabilities for a 1M-token prompt is tens of MB; 256 MiB bounds a
// runaway engine without refusing any realistic answer.
const MaxResponseBytes = 256 << 20

// proxy forwards the original body to the engine and relays its answer.
// It returns the error Decision.Done receives: nil on success.
func (x *exchange) proxy(ctx context.Context) (err error) {
	ctx, span := x.startUpstream(ctx, x.dec.EndpointURL, x.dec.Worker)
	defer func() { endUpstream(span, err) }()
	// WorkerHeader tells the client which engine rank served it: operators
	// use it to debug affinity and cache placement, and it carries nothing
	// the client could not learn from latency anyway.
	x.w.Header().Set(WorkerHeader, x.dec.Worker.String())
	if x.dec.Prefill != nil {
		x.w.Header().Set(PrefillWorkerHeader, x.dec.Prefill.Worker.String())
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the upstream request on every return path
	// An engine dropped for silence will not answer: ending the upstream
	// request frees the client, mid-stream or still waiting.
	defer context.AfterFunc(x.dec.Lost(), cancel)()
	resp, err := x.roundTrip(ctx)
	// A prefill hop running beside this one decides first: until it
	// succeeded, nothing of the decode answer may reach the client.
	if perr := x.awaitPrefill(resp, err); perr != nil {
		return perr
	}
	if err != nil {
		if op := netOp(err); !x.rerouted && (op == "dial" || op == "write") && x.r.Context().Err() == nil {
			// Nothing was written to the client, and the engine saw
			// nothing (dial) or no whole request: roundTrip's second
			// write failed too, on another kept-alive connection, which
			// an engine that died leaves in the pool by the dozen. Serve
			// routes the request again.
			x.s.log.Warn("engine unreachable, routing again", "request", x.id, "worker", x.dec.Worker.String(), "err", err)
			return fmt.Errorf("%w: %w", dispatch.ErrEngineUnreachable, err)
		}
		return x.upstreamFailed(ctx, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return x.engineRefusedKey(resp)
	case x.dec.Prefill != nil && (resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusUnprocessableEntity):
		return x.handoffRejected(resp)
	case resp.StatusCode >= 400:
		return x.relayError(resp)
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		return x.upstreamFailed(ctx, fmt.Errorf("unexpected engine status %d", resp.StatusCode))
	case oaiedge.IsEventStream(resp.Header):
		return x.relayStream(resp)
	}
	return x.relayBody(ctx, resp)
}

// cutByDrain reports a request the server's drain ended at its deadline
// (Server.shutdown), as opposed to a client that left.
func (x *exchange) cutByDrain() bool {
	return errors.Is(context.Cause(x.r.Context()), ErrShuttingDown)
}

// lostCause is why the dispatcher ended the request's engine
// (dispatch.ErrEngineSilent), or nil while it has not.
func (x *exchange) lostCause() error {
	if lost := x.dec.Lost(); lost.Err() != nil {
		return context.Cause(lost)
	}
	return nil
}

// roundTrip sends the request to the engine and returns its answer's
// head. A request whose write failed is sent once more: the engine closed
// the connection under it (it restarted, died, or closed a kept-alive
// connection just as it was reused), so it cannot have read the whole
// request, and net/http does not replay a request it wrote a part of. On
// an engine that died the second attempt finds nothing to connect to, or
// another of the connections it left in the pool; proxy answers either by
// routing the request elsewhere.
func (x *exchange) roundTrip(ctx context.Context) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		req, err := x.upstreamRequest(ctx)
		if err != nil {
			return nil, err
		}
		resp, err := x.s.engines.RoundTrip(req)
		if err == nil && resp.Body == nil {
			resp.Body = http.NoBody // a RoundTripper other than net/http's may leave it nil
		}
		if err == nil || attempt > 0 || netOp(err) != "write" || ctx.Err() != nil {
			return resp, err
		}
	}
}

// netOp is the operation of err's net.OpError, "" without one: "dial" is
// a failure to connect (refused, timed out, no route), after which the
// engine cannot have seen the request, and "write" a failure to write
// the request on a connection (reset, closed by the engine or by net/http
// on seeing it closed).
func netOp(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Op
	}
	return ""
}

// upstreamRequest builds the engine request: the client's body byte for
// byte, the request id, the trace context and the engines' API key when
// one is configured. The client's own credentials are not forwarded: they
// are meant for the service in front of the fleet, not for the engines.
// The body is read from the exchange's pooled buffer, and GetBody lets
// the transport replay it on a fresh connection when a kept-alive one
// turns out to be closed: an engine that restarted or closed an idle
// connection just as it was reused has seen no request, and one that died
// leaves the replay a dial error, after which serve routes the request
// elsewhere. net/http replays a POST (a request it wrote whole, on a
// reused connection that then failed before any byte of an answer) only
// when it is marked idempotent; the mark's empty value is not sent. An
// engine that read the request and then crashed can cause that too, and
// then does the prefill twice: the price of not failing requests on
// connections an engine closed while they idled. roundTrip replays a
// request whose write failed.
func (x *exchange) upstreamRequest(ctx context.Context) (*http.Request, error) {
	b := x.body
	if x.sendBody != nil { // a disaggregated request's decode hop
		b = x.sendBody
	}
	rd, err := b.reader()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.dec.EndpointURL+x.ep.Path(), rd)
	if err != nil {
		_ = rd.Close()
		return nil, err
	}
	req.ContentLength = int64(len(b.data))
	req.GetBody = b.reader
	x.engineHeaders(ctx, req.Header, x.p.Stream)
	req.Header["Idempotency-Key"] = nil
	return req, nil
}

// The engine request's fixed header values.
var (
	jsonType        = []string{"application/json"}
	eventStreamType = []string{"text/event-stream"}
)

// upstreamFailed handles an engine that could not be reached or failed
// before the first byte of the answer: 502, or nothing when the client is
// the one who left.
func (x *exchange) upstreamFailed(ctx context.Context, cause error) error {
	if x.cutByDrain() {
		x.fail(ErrShuttingDown)
		return ErrShuttingDown
	}
	if err := x.r.Context().Err(); err != nil {
		x.status = StatusClientClosed
		return err
	}
	lost := x.lostCause()
	if lost != nil {
		cause = lost
	}
	if ctx.Err() == nil || lost != nil {
		x.s.log.Warn("engine request failed", "request", x.id, "worker", x.dec.Worker.String(), "err", cause)
	}
	x.fail(fmt.Errorf("%w: engine %v did not answer", ErrUpstream, x.dec.Worker))
	return fmt.Errorf("%w: %w", ErrUpstream, cause)
}

// engineRefusedKey handles an engine that refused the router's
// credentials (401 or 403). That is the deployment's fault, not the
// client's, so the client gets 502 rather than a status that tells it to
// fix its own key, and the log says which setting to check.
func (x *exchange) engineRefusedKey(resp *http.Response) error {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxUpstreamErrorBytes))
	x.s.log.Warn("engine refused the router's credentials", "request", x.id, "worker", x.dec.Worker.String(),
		"status", resp.StatusCode, "engine_api_key_set", x.s.cfg.EngineAPIKey != "")
	x.fail(fmt.Errorf("%w: engine %v refused the router's credentials (status %d)", ErrUpstream, x.dec.Worker, resp.StatusCode))
	return fmt.Errorf("%w: engine status %d", ErrUpstream, resp.StatusCode)
}

// relayError passes an engine's error status on with its body normalised
// to the OpenAI shape.
func (x *exchange) relayError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamErrorBytes))
	x.status = resp.StatusCode
	oaiedge.WriteJSON(x.w, resp.StatusCode, normaliseUpstreamError(resp.StatusCode, raw))
	return fmt.Errorf("%w: engine status %d", ErrUpstream, resp.StatusCode)
}

// relayBody relays a non-streaming answer. It is buffered (bounded by
// MaxResponseBytes) so that the usage can be read and the client gets a
// Content-Length; the write has WriteTimeout to complete.
func (x *exchange) relayBody(ctx context.Context, resp *http.Response) error {
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err == nil && len(data) > MaxResponseBytes {
		err = fmt.Errorf("response over %d bytes", MaxResponseBytes)
	}
	if err != nil {
		return x.upstreamFailed(ctx, err)
	}
	x.dec.OnFirstToken()
	x.obs.inspectChunk(data)
	x.dec.OnOutputTokens(x.obs.outputTokens())
	h := x.w.Header()
	h.Set("Content-Type", contentType(resp.Header))
	h.Set("Content-Length", strconv.Itoa(len(data)))
	_ = x.rc.SetWriteDeadline(x.s.cfg.Now().Add(x.s.cfg.WriteTimeout))
	x.status = resp.StatusCode
	x.w.WriteHeader(resp.StatusCode)
	if _, err := x.w.Write(data); err != nil {
		x.status = StatusClientClosed
		return err
	}
	return nil
}

// contentType is the engine's content type, JSON when it sent none.
func contentType(h http.Header) string {
	if ct := h.Get("Content-Type"); ct != "" {
		return ct
	}
	return "application/json"
}
