package server

import (
	"net/http"
)

// sse writes server-sent events and remembers the first write error, after
// which every write is skipped: the client is gone.
type sse struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

func (s *sse) send(v any) {
	if s.err == nil {
		_, s.err = s.w.Write(marshalEvent(v))
	}
}

func (s *sse) done() {
	if s.err == nil {
		_, s.err = s.w.Write([]byte("data: [DONE]\n\n"))
	}
}

func (s *sse) flush() {
	if s.err == nil {
		s.err = s.rc.Flush()
	}
}

// stream writes the response as server-sent events at the pace the engine
// generates: for chat a role delta first, then one chunk per token, a
// finish chunk, a usage chunk when asked for, and [DONE]. A client that
// disconnects stops the stream, and the handler then cancels the request
// in the engine.
func (o *output) stream(w http.ResponseWriter, r *http.Request, p *pending) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	out := &sse{w: w, rc: http.NewResponseController(w)}
	if o.gen.chat {
		out.send(o.envelope(true, choice{Delta: &delta{Role: "assistant", Content: new(string)}}))
	}
	out.flush()
	sent := 0
	for out.err == nil {
		select {
		case <-r.Context().Done():
			return
		case <-p.notify:
		}
		pr := p.read()
		for ; sent < pr.tokens && out.err == nil; sent++ {
			out.send(o.envelope(true, o.textChoice(Word(sent), nil, false)))
		}
		if pr.finished {
			o.end(out, &pr)
			return
		}
		out.flush()
	}
}

// end writes the tail of a stream: an error event if the engine stopped,
// else the finish chunk, the usage chunk when asked for, and [DONE].
func (o *output) end(out *sse, pr *progress) {
	if pr.err != nil {
		out.send(apiError{Error: apiErrorBody{Message: pr.err.Error(), Type: "server_error", Code: "engine_stopped"}})
		out.flush()
		return
	}
	reason := o.finishReason()
	out.send(o.envelope(true, o.textChoice("", &reason, false)))
	if o.gen.includeUsage {
		msg := o.envelope(true)
		msg.Usage = o.usage(&pr.done)
		out.send(msg)
	}
	out.done()
	out.flush()
}
