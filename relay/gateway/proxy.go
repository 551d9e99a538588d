package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// relayBufBytes is the copy buffer of a relayed answer: one SSE event is
// a few hundred bytes, so a read rarely fills it and each is flushed.
const relayBufBytes = 32 << 10

// hopHeaders are the hop-by-hop headers (RFC 9110 §7.6.1) a proxy must
// not pass on, in either direction (canonical keys).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// serveLocal proxies the request to the local router nodes, from the
// round-robin position on, trying the next node when one refuses the
// connection; decision is the label the request is counted under.
func (x *exchange) serveLocal(decision string) {
	g := x.g
	for n, i := range g.nodes.order() {
		if n > 0 {
			g.metrics.NodeRetries.Inc()
		}
		resp, err := x.send(g.nodes.urls[i], "")
		if err == nil {
			x.relay(resp, g.cfg.DC)
			g.metrics.decided(decision)
			return
		}
		if !isRefused(err) {
			x.upstreamFailed(err)
			return
		}
		g.nodes.markDown(i)
	}
	x.upstreamFailed(fmt.Errorf("every router node refused the connection"))
}

// serveRemote forwards the request to dc's gateway. When that fails
// before the first byte of the answer (no connection, or a 5xx status),
// the request is served here instead, except a session request when
// Config.SessionFallback is off, which is refused with a 503 rather than
// served by a second DC.
func (x *exchange) serveRemote(dc string) {
	g := x.g
	resp, err := x.sendRemote(dc)
	if err == nil && resp.StatusCode < 500 {
		resp, err = bufferAnswer(resp)
	}
	if err == nil && resp.StatusCode < 500 {
		x.relay(resp, dc)
		g.metrics.decided(DecisionRemote)
		return
	}
	cause := err
	if err == nil {
		cause = fmt.Errorf("status %d", resp.StatusCode)
		_ = resp.Body.Close()
	}
	if x.r.Context().Err() != nil {
		return // the client left; nobody to answer
	}
	g.cfg.Log.Warn("remote DC failed before answering", "dc", dc, "session", x.session, "err", cause)
	if x.session != "" && !g.cfg.SessionFallback {
		x.reject(fmt.Errorf("%w: dc %s: %w", ErrSessionUnavailable, dc, cause))
		return
	}
	x.serveLocal(DecisionFallback)
}

// maxBufferedAnswer bounds the remote answers read whole before the
// client sees a byte: a whole completion of any usual length.
const maxBufferedAnswer = 4 << 20

// bufferAnswer reads a remote DC's answer whole before anything is sent
// to the client, unless it is an event stream (whose first tokens must
// not wait) or longer than maxBufferedAnswer (then the rest streams). A
// remote gateway that dies mid-answer then fails the request before its
// first byte, so it falls back or is refused cleanly, where a relayed
// answer would be cut after its status line. A stream that fails ends
// with an error event (midStreamFailure).
func bufferAnswer(resp *http.Response) (*http.Response, error) {
	if oaiedge.IsEventStream(resp.Header) {
		return resp, nil
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxBufferedAnswer+1))
	if err != nil {
		_ = resp.Body.Close()
		return nil, err
	}
	if len(head) <= maxBufferedAnswer {
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(head))
		resp.ContentLength = int64(len(head))
		return resp, nil
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	return resp, nil
}

// send posts the body to base's endpoint with the client's end-to-end
// headers; from, when set, marks the request as forwarded by that DC.
// A forwarded-in request keeps its mark on the way to the local node,
// which may log where it came from.
// The caller owns the response body.
func (x *exchange) send(base, from string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(x.r.Context(), http.MethodPost, base+x.ep.Path(), bytes.NewReader(x.body))
	if err != nil {
		return nil, err
	}
	req.ContentLength = int64(len(x.body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(x.body)), nil }
	copyHeaders(req.Header, x.r.Header)
	if from != "" {
		req.Header.Set(ForwardedHeader, from)
	}
	ctx, span := x.startForward(req.Context(), req.Header, base)
	resp, err := x.g.client.Do(req.WithContext(ctx))
	endForward(span, resp, err)
	return resp, err
}

// relay streams an upstream answer to the client byte for byte: status,
// end-to-end headers and DCHeader, then each read of the body written and
// flushed at once under a fresh write deadline. An event stream's status
// line is flushed before its first event, which may be a while coming;
// any other answer's goes out with the first read of its body, so that a
// buffered answer leaves in one write and a gateway that dies while
// sending it rarely leaves the client a status line without its body.
func (x *exchange) relay(resp *http.Response, dc string) {
	defer resp.Body.Close()
	h := x.w.Header()
	copyHeaders(h, resp.Header)
	h.Set(DCHeader, dc)
	if resp.ContentLength >= 0 {
		h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	x.w.WriteHeader(resp.StatusCode)
	if oaiedge.IsEventStream(resp.Header) {
		_ = x.rc.Flush()
	}
	buf := make([]byte, relayBufBytes)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			_ = x.rc.SetWriteDeadline(x.g.cfg.Now().Add(oaiedge.StreamWriteTimeout))
			if _, werr := x.w.Write(buf[:n]); werr != nil {
				return // the client left or stalled; the deferred close ends the upstream
			}
			_ = x.rc.Flush()
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			x.midStreamFailure(resp, dc, err)
			return
		}
	}
}

// midStreamFailure ends an answer whose upstream failed after the first
// byte, when no fallback is possible any more: an SSE stream gets an
// error event; any other body is cut short, which the client sees as a
// length or JSON error.
func (x *exchange) midStreamFailure(resp *http.Response, dc string, err error) {
	if x.r.Context().Err() != nil {
		return
	}
	x.g.cfg.Log.Warn("upstream failed mid-answer", "dc", dc, "err", err)
	if !oaiedge.IsEventStream(resp.Header) {
		return
	}
	// The class is a failed upstream's, whichever DC it was in.
	_, _ = x.w.Write(oaiedge.StreamErrorEvent(errors.New("upstream failed mid-stream"), errorTable.Classify(ErrNoNode)))
	_ = x.rc.Flush()
}

// upstreamFailed answers a request no node could take, unless the client
// is the one who left.
func (x *exchange) upstreamFailed(err error) {
	if x.r.Context().Err() != nil {
		return
	}
	x.g.cfg.Log.Warn("router node request failed", "dc", x.g.cfg.DC, "err", err)
	x.reject(fmt.Errorf("%w: %w", ErrNoNode, err))
}

// copyHeaders adds src's end-to-end headers to dst.
func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		if slices.Contains(hopHeaders, k) || k == "Content-Length" || k == "Host" {
			continue
		}
		dst[k] = append(dst[k][:0:0], vs...)
	}
}

// maxControlDrain bounds what closing a control answer reads of its rest:
// node control answers are a short JSON object, and a longer one is not
// worth reading to keep its connection.
const maxControlDrain = 64 << 10

// cancelOnClose cancels a request's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

// Close reads the rest of the body (up to maxControlDrain), closes it and
// then releases the context. Reading the rest lets net/http keep the
// connection: a body closed unread costs the next control call (a session
// lookup on every session request) a new connection and the goroutines
// that serve it at both ends.
func (c *cancelOnClose) Close() error {
	_, _ = io.Copy(io.Discard, io.LimitReader(c.ReadCloser, maxControlDrain))
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
