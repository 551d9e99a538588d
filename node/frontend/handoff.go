package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// errPrefillFailed reports a prefill hop that failed before anything
// reached the client: the engine could not be reached, broke the
// connection, answered 5xx or answered without a hand-off. serve routes
// such a request once more, to another pair; a second failure is a 502.
var errPrefillFailed = errors.New("prefill hop failed")

// send forwards the request: to its engine, or, for a disaggregated
// decision, in two hops, prefill then decode, in the way the prefill
// engine hands off (vLLM's kv_transfer_params, or SGLang's bootstrap
// server when the engine declares its port).
func (x *exchange) send(ctx context.Context) error {
	switch {
	case x.dec.Prefill == nil:
		return x.proxy(ctx)
	case x.dec.Prefill.BootstrapPort != 0:
		return x.sglangHandoff(ctx)
	}
	return x.vllmHandoff(ctx)
}

// vllmHandoff runs vLLM's two hops one after the other, as vLLM's own
// disaggregated proxy does: the prefill request (max_tokens 1, not
// streamed, do_remote_decode) to the prefill engine, whose answer carries
// the kv_transfer_params (remote engine, block ids, host and port) that
// the decode request then sends unchanged. The decode hop's answer is the
// client's.
func (x *exchange) vllmHandoff(ctx context.Context) error {
	body, err := vllmPrefillBody(x.body.data)
	if err != nil {
		return x.handoffRefused(err)
	}
	res := x.callPrefill(ctx, body)
	answer, err := x.settlePrefill(res)
	if err != nil {
		return err
	}
	params, err := transferParams(answer)
	if err != nil {
		return x.prefillFailed(err)
	}
	x.dec.Prefill.Done(nil)
	decode, err := vllmDecodeBody(x.body.data, params)
	if err != nil {
		return x.handoffRefused(err)
	}
	x.sendBody = wrapBody(decode)
	return x.proxy(ctx)
}

// sglangHandoff runs SGLang's two hops at once, as SGLang's router does:
// both carry the prefill engine's bootstrap host and port and a random
// room, the prefill hop runs beside the decode hop (the decode engine
// fetches the cache through the bootstrap server, so neither may wait for
// the other), and nothing of the decode hop reaches the client before the
// prefill hop succeeded (proxy waits for it, see awaitPrefill).
func (x *exchange) sglangHandoff(ctx context.Context) error {
	h := x.dec.Prefill
	u, err := url.Parse(h.EndpointURL)
	if err != nil {
		return x.handoffRefused(err)
	}
	b := bootstrap{host: u.Hostname(), port: h.BootstrapPort, room: bootstrapRoom(h.Worker.Rank, h.DPSize, rand.Uint64())}
	prefill, err := sglangBody(x.body.data, b, true)
	if err != nil {
		return x.handoffRefused(err)
	}
	decode, err := sglangBody(x.body.data, b, false)
	if err != nil {
		return x.handoffRefused(err)
	}
	x.sendBody = wrapBody(decode)
	dctx, cancelDecode := context.WithCancel(ctx)
	defer cancelDecode()
	x.pending = x.startPrefill(ctx, prefill, cancelDecode)
	return x.proxy(dctx)
}

// bootstrapRoom is a random room below 2^63 (SGLang's room is a signed
// 64-bit id) that names the prefill rank: SGLang gives a request to the
// rank room mod dp_size. r is the random draw.
func bootstrapRoom(rank, dpSize uint32, r uint64) uint64 {
	r &= 1<<63 - 1
	if dpSize <= 1 || rank >= dpSize {
		return r
	}
	size, maxRoom := uint64(dpSize), uint64(1<<63-1)
	q := r % ((maxRoom-uint64(rank))/size + 1)
	return q*size + uint64(rank)
}

// handoffRefused ends a disaggregated request whose hand-off bodies could
// not be built: the body parsed as a JSON object, so this is a router
// bug, answered 500 rather than sent half-rewritten.
func (x *exchange) handoffRefused(err error) error {
	x.dec.Prefill.Done(err)
	err = fmt.Errorf("frontend: building the hand-off: %w", err)
	x.fail(err)
	return err
}

// prefillFailed ends the prefill hop as unreachable, so that the
// dispatcher leaves its engine out for a while, and returns
// errPrefillFailed for serve to route the request again; on the second
// route it answers the client with 502 instead. Nothing was written to
// the client yet.
func (x *exchange) prefillFailed(cause error) error {
	h := x.dec.Prefill
	h.Done(fmt.Errorf("%w: %w", dispatch.ErrEngineUnreachable, cause))
	x.s.log.Warn("prefill hop failed", "request", x.id, "worker", h.Worker.String(), "rerouted", x.rerouted, "err", cause)
	if x.rerouted {
		err := fmt.Errorf("%w: prefill engine %v failed: %w", ErrUpstream, h.Worker, cause)
		x.fail(err)
		return err
	}
	return fmt.Errorf("%w: engine %v: %w", errPrefillFailed, h.Worker, cause)
}

// handoffRejected answers a decode engine that refused a disaggregated
// request as invalid (400 or 422): the prefill engine took the same body,
// so what the decode engine refused is the hand-off the router added, not
// the client's request. The client gets 502 with the engine's message.
func (x *exchange) handoffRejected(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamErrorBytes))
	msg := upstreamMessage(resp.StatusCode, raw)
	x.s.log.Warn("decode engine refused the hand-off", "request", x.id, "worker", x.dec.Worker.String(),
		"prefill_worker", x.dec.Prefill.Worker.String(), "status", resp.StatusCode, "message", msg)
	err := fmt.Errorf("%w: decode engine %v refused the hand-off of prefill engine %v (status %d): %s",
		ErrUpstream, x.dec.Worker, x.dec.Prefill.Worker, resp.StatusCode, msg)
	x.fail(err)
	return err
}

// upstreamMessage is the message of an engine's error body, as
// normaliseUpstreamError reads it.
func upstreamMessage(status int, raw []byte) string {
	var b oaiedge.ErrorBody
	_ = json.Unmarshal(normaliseUpstreamError(status, raw), &b)
	return b.Error.Message
}
