package frontend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/internal/telemetry"
)

// maxPrefillAnswerBytes bounds a prefill engine's answer, which the
// router reads whole for its hand-off: a one-token completion with its
// kv_transfer_params (a block id per prompt block: 64k ids for a 1M-token
// prompt at block size 16) is well under 2 MiB.
const maxPrefillAnswerBytes = 2 << 20

// PrefillWorkerHeader is the response header naming the prefill engine
// rank of a disaggregated request, beside WorkerHeader's decode rank.
const PrefillWorkerHeader = "X-Kvrouter-Prefill-Worker"

// hopResult is what a prefill request came back with, before the
// exchange decides what it means (settlePrefill): an answer, an engine
// status with its error body, or a transport error.
type hopResult struct {
	answer []byte
	status int
	err    error
}

// callPrefill sends body to the prefill engine and reads its answer. It
// does no more than the I/O (no write to the client, no Done), so that
// it may run beside the decode hop. An engine dropped for silence ends
// the call.
func (x *exchange) callPrefill(ctx context.Context, body []byte) hopResult {
	h := x.dec.Prefill
	ctx, span := x.startUpstream(ctx, h.EndpointURL, h.Worker, attribute.String("kvrouter.hop", "prefill"))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.Lost(), cancel)()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.EndpointURL+x.ep.Path(), bytes.NewReader(body))
	if err != nil {
		return hopResult{err: err}
	}
	x.engineHeaders(ctx, req.Header, false)
	resp, err := x.s.engines.RoundTrip(req)
	if err != nil {
		endUpstream(span, err)
		return hopResult{err: err}
	}
	defer resp.Body.Close()
	limit := int64(maxPrefillAnswerBytes)
	if resp.StatusCode >= 300 {
		limit = maxUpstreamErrorBytes
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err == nil && int64(len(data)) > limit && resp.StatusCode < 300 {
		err = fmt.Errorf("prefill answer over %d bytes", limit)
	}
	endUpstream(span, err)
	return hopResult{answer: data, status: resp.StatusCode, err: err}
}

// settlePrefill decides what a prefill request's outcome means, on the
// request's goroutine: its answer on success; a client error the engine
// refused the request with, relayed as the engine sent it (the client's
// request is at fault, not the hop); a refusal of the router's
// credentials, 502; anything else a failed hop (prefillFailed). The
// prefill hop's Done is called on every path but success, which the
// caller ends once it has the hand-off.
func (x *exchange) settlePrefill(r hopResult) ([]byte, error) {
	h := x.dec.Prefill
	switch {
	case r.err != nil && x.r.Context().Err() != nil:
		h.Done(r.err)
		x.status = StatusClientClosed
		return nil, x.r.Context().Err()
	case r.err != nil:
		return nil, x.prefillFailed(r.err)
	case r.status == http.StatusUnauthorized || r.status == http.StatusForbidden:
		h.Done(fmt.Errorf("engine status %d", r.status))
		err := fmt.Errorf("%w: prefill engine %v refused the router's credentials (status %d)", ErrUpstream, h.Worker, r.status)
		x.fail(err)
		return nil, err
	case r.status >= 500 || (r.status < 400 && (r.status < 200 || r.status >= 300)):
		return nil, x.prefillFailed(fmt.Errorf("engine status %d", r.status))
	case r.status >= 400:
		h.Done(fmt.Errorf("engine status %d", r.status))
		x.status = r.status
		oaiedge.WriteJSON(x.w, r.status, normaliseUpstreamError(r.status, r.answer))
		return nil, fmt.Errorf("%w: prefill engine status %d", ErrUpstream, r.status)
	}
	return r.answer, nil
}

// engineHeaders sets an engine request's headers: JSON, the request id,
// the engines' API key when one is configured, the trace context, and
// the answer type.
func (x *exchange) engineHeaders(ctx context.Context, h http.Header, stream bool) {
	// The keys are canonical already: set directly, they skip Set's
	// canonicalisation, and the values' slices are shared, read-only.
	h["Content-Type"] = jsonType
	h["X-Request-Id"] = []string{x.id}
	if x.s.engineAuth != "" {
		h["Authorization"] = []string{x.s.engineAuth}
	}
	if stream {
		h["Accept"] = eventStreamType
	} else {
		h["Accept"] = jsonType
	}
	telemetry.Propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// concurrentPrefill is a prefill request running beside its decode hop
// (SGLang's hand-off). The exchange owns its goroutine: proxy waits for
// it right after the decode request's head (awaitPrefill), and finish
// does if proxy never ran.
type concurrentPrefill struct {
	cancel context.CancelFunc
	done   chan struct{}
	res    hopResult

	// mu orders the two hops' failures: the first to fail cancels the
	// other, and the outcome is that first failure's.
	mu            sync.Mutex
	prefillFirst  bool
	decodeStopped bool
}

// startPrefill sends the prefill request on a goroutine of its own; a
// failed prefill cancels the decode hop (cancelDecode), whose engine
// would otherwise wait for a cache that never comes.
func (x *exchange) startPrefill(ctx context.Context, body []byte, cancelDecode context.CancelFunc) *concurrentPrefill {
	pctx, cancel := context.WithCancel(ctx)
	p := &concurrentPrefill{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.res = x.callPrefill(pctx, body)
		if p.res.err == nil && p.res.status >= 200 && p.res.status < 300 {
			return
		}
		p.mu.Lock()
		if !p.decodeStopped {
			p.prefillFirst = true
			cancelDecode()
		}
		p.mu.Unlock()
	}()
	return p
}

// awaitPrefill settles a concurrent prefill hop once the decode hop has
// its head (resp) or failed (err). A decode hop that failed first cancels
// the prefill hop, which ends as abandoned, and proxy handles the decode
// failure as ever; otherwise the prefill hop's outcome decides: a
// failure closes the decode answer and is returned for proxy to return,
// success ends the prefill hop and lets proxy relay the decode answer.
func (x *exchange) awaitPrefill(resp *http.Response, err error) error {
	p := x.pending
	if p == nil {
		return nil
	}
	x.pending = nil
	if err != nil {
		p.mu.Lock()
		if !p.prefillFirst {
			p.decodeStopped = true
			p.cancel()
		}
		p.mu.Unlock()
	}
	<-p.done
	p.cancel()
	if err != nil && !p.prefillFirst {
		x.dec.Prefill.Done(errDecodeFailedFirst)
		return nil
	}
	if _, perr := x.settlePrefill(p.res); perr != nil {
		if resp != nil {
			_ = resp.Body.Close()
		}
		return perr
	}
	x.dec.Prefill.Done(nil)
	return nil
}

// errDecodeFailedFirst ends a prefill hop cancelled because its decode
// hop failed.
var errDecodeFailedFirst = errors.New("the decode hop failed first")
