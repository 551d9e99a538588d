package frontend

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// maxEventBytes caps one SSE event from an engine. Events are single
// chunks of a few hundred bytes (a little more with log probabilities);
// 16 MiB bounds the buffer a broken engine can make the node grow.
const maxEventBytes = 16 << 20

// errEventTooLarge reports an engine event over maxEventBytes.
var errEventTooLarge = errors.New("engine event too large")

// errStreamTruncated reports a stream that ended without [DONE].
var errStreamTruncated = errors.New("engine stream ended without [DONE]")

// relayStream relays an SSE answer event by event. Each event is written
// under a fresh StreamWriteTimeout deadline and flushed at once, so a slow
// but progressing client keeps its stream while one that stopped reading
// is cut; the deferred cancel in proxy then ends the engine request.
func (x *exchange) relayStream(resp *http.Response) error {
	h := x.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	x.status = http.StatusOK
	x.w.WriteHeader(http.StatusOK)
	if err := x.flush(); err != nil {
		return x.clientGone(err)
	}
	rd := bufio.NewReaderSize(resp.Body, 32<<10)
	var ev []byte
	for {
		var err error
		ev, err = readEvent(rd, ev[:0])
		// An event cut off by the end of the engine's stream is never
		// relayed: SSE discards an event without its closing blank line,
		// and the bytes would run into the error event that follows.
		if len(ev) > 0 && (err == nil || bytes.HasSuffix(ev, []byte("\n\n"))) {
			x.observeEvent(ev)
			if werr := x.writeEvent(ev); werr != nil {
				return x.clientGone(werr)
			}
		}
		if err != nil {
			return x.streamEnded(err)
		}
	}
}

// readEvent appends the next SSE event (its lines up to and including the
// blank line that ends it) to buf. At the end of the stream it returns
// what it has with io.EOF.
func readEvent(rd *bufio.Reader, buf []byte) ([]byte, error) {
	partial := false
	for {
		line, err := rd.ReadSlice('\n')
		buf = append(buf, line...)
		if len(buf) > maxEventBytes {
			return nil, errEventTooLarge
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			partial = true
			continue
		case err != nil:
			return buf, err
		}
		if !partial && len(buf) > len(line) && isBlank(line) {
			return buf, nil
		}
		partial = false
	}
}

// isBlank reports an empty line ("\n" or "\r\n").
func isBlank(line []byte) bool {
	return len(line) == 1 || len(line) == 2 && line[0] == '\r'
}

// observeEvent feeds the data lines of one event to the observation,
// timing the first and last content events.
func (x *exchange) observeEvent(ev []byte) {
	for len(ev) > 0 {
		line := ev
		if i := bytes.IndexByte(ev, '\n'); i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimLeft(data, " ")
		if string(data) == "[DONE]" {
			x.obs.sawDone = true
			continue
		}
		if x.obs.inspectChunk(data) {
			x.contentEvent()
		}
	}
}

// contentEvent records one content event; the first ends the prefill.
// Each counts as one generated token of the request's decode load: vLLM
// and SGLang stream a token per chunk unless told to batch them, and the
// usage that counts them exactly comes only at the end.
func (x *exchange) contentEvent() {
	now := x.s.cfg.Now()
	if x.obs.chunks == 0 {
		x.obs.firstToken = now
		x.dec.OnFirstToken()
	}
	x.obs.lastToken = now
	x.obs.chunks++
	x.dec.OnOutputTokens(1)
}

// writeEvent writes and flushes one event under a fresh write deadline.
func (x *exchange) writeEvent(ev []byte) error {
	_ = x.rc.SetWriteDeadline(x.s.cfg.Now().Add(x.s.cfg.StreamWriteTimeout))
	if _, err := x.w.Write(ev); err != nil {
		return err
	}
	return x.flush()
}

// flush pushes buffered bytes to the client.
func (x *exchange) flush() error {
	if err := x.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// clientGone records a client that left or stalled mid-stream.
func (x *exchange) clientGone(err error) error {
	x.status = StatusClientClosed
	x.s.log.Debug("client gone during stream", "request", x.id, "err", err)
	return err
}

// streamEnded settles the end of the engine stream: a clean end after
// [DONE] is success; anything else is reported to the client as an error
// event (the status line is long gone), unless the client itself left.
func (x *exchange) streamEnded(err error) error {
	// Once [DONE] has reached the client the answer is complete: a client
	// that closes right after it cancels the request context, and the
	// engine read then fails with that cancellation, not io.EOF.
	if x.obs.sawDone && !x.obs.streamError {
		return nil
	}
	if x.cutByDrain() {
		x.status = http.StatusServiceUnavailable
		_ = x.writeEvent(oaiedge.StreamErrorEvent(ErrShuttingDown, x.s.errs.Classify(ErrShuttingDown)))
		return ErrShuttingDown
	}
	if cerr := x.r.Context().Err(); cerr != nil {
		return x.clientGone(cerr)
	}
	switch lost := x.lostCause(); {
	case lost != nil:
		err = lost
	case x.obs.streamError:
		err = errors.New("engine reported an error in the stream")
	case errors.Is(err, io.EOF):
		err = errStreamTruncated
	}
	x.s.log.Warn("engine stream failed", "request", x.id, "worker", x.dec.Worker.String(), "err", err)
	x.status = http.StatusBadGateway
	if !x.obs.streamError {
		cerr := fmt.Errorf("%w: engine %v failed mid-stream", ErrUpstream, x.dec.Worker)
		_ = x.writeEvent(oaiedge.StreamErrorEvent(cerr, x.s.errs.Classify(cerr)))
	}
	return fmt.Errorf("%w: %w", ErrUpstream, err)
}
