package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/kvrouter/kvrouter/mocker"
)

// fillerWords are the simulated output: token i is fillerWords[i mod n],
// so outputs are deterministic and their length in tokens is visible.
var fillerWords = [...]string{
	"lorem ", "ipsum ", "dolor ", "sit ", "amet ", "consectetur ", "adipiscing ", "elit ",
	"sed ", "do ", "eiusmod ", "tempor ", "incididunt ", "ut ", "labore ", "magna ",
}

// Word is the text of output token i.
func Word(i int) string { return fillerWords[i%len(fillerWords)] }

// output writes one request's response in the chat or completion shape.
type output struct {
	srv     *Server
	gen     *generation
	id      string
	created int64
	// transfer is the hand-off a vLLM-style prefill answer carries.
	transfer json.RawMessage
}

// usage is the OpenAI usage object; cached tokens are the prefix the
// engine found in its cache at admission.
type usage struct {
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
	TotalTokens      int           `json:"total_tokens"`
	PromptDetails    promptDetails `json:"prompt_tokens_details"`
}

type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

func (o *output) usage(c *mocker.Completion) *usage {
	cached := min(c.HitBlocks*o.srv.cfg.Engine.BlockSize, c.PromptTokens)
	o.srv.prefixQueried.Add(uint64(c.PromptTokens))
	o.srv.prefixHit.Add(uint64(cached))
	return &usage{PromptTokens: c.PromptTokens, CompletionTokens: c.OutputTokens,
		TotalTokens: c.PromptTokens + c.OutputTokens, PromptDetails: promptDetails{CachedTokens: cached}}
}

// finishReason is "length" when the client capped the output (the engine
// always generates exactly that many tokens) and "stop" otherwise, as if
// the default length were where the model stopped.
func (o *output) finishReason() string {
	if o.gen.limited {
		return "length"
	}
	return "stop"
}

// message is one response object, chunk or full; choice fields that do not
// apply to the shape are omitted.
type message struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage,omitempty"`
	// KVTransferParams is a vLLM-style prefill engine's hand-off.
	KVTransferParams json.RawMessage `json:"kv_transfer_params,omitempty"`
}

type choice struct {
	Index        int       `json:"index"`
	Text         *string   `json:"text,omitempty"`
	Delta        *delta    `json:"delta,omitempty"`
	Message      *delta    `json:"message,omitempty"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type delta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

func (o *output) object(chunk bool) string {
	switch {
	case o.gen.chat && chunk:
		return "chat.completion.chunk"
	case o.gen.chat:
		return "chat.completion"
	}
	return "text_completion"
}

func (o *output) envelope(chunk bool, choices ...choice) *message {
	if choices == nil {
		choices = []choice{}
	}
	return &message{ID: o.id, Object: o.object(chunk), Created: o.created, Model: o.srv.cfg.Engine.Model, Choices: choices}
}

// textChoice carries text (and a finish reason when final) in the shape of
// the request: a chat delta, a chat message or completion text.
func (o *output) textChoice(text string, finish *string, full bool) choice {
	c := choice{FinishReason: finish}
	switch {
	case !o.gen.chat:
		c.Text = &text
	case full:
		c.Message = &delta{Role: "assistant", Content: &text}
	case finish != nil:
		c.Delta = &delta{}
	default:
		c.Delta = &delta{Content: &text}
	}
	return c
}

// respond waits for the completion and writes the full object.
func (o *output) respond(w http.ResponseWriter, r *http.Request, p *pending) {
	for {
		select {
		case <-r.Context().Done():
			return
		case <-p.notify:
		}
		pr := p.read()
		if !pr.finished {
			continue
		}
		if pr.err != nil {
			writeError(w, http.StatusServiceUnavailable, "server_error", "engine_stopped", pr.err.Error())
			return
		}
		var b strings.Builder
		for i := range pr.done.OutputTokens {
			b.WriteString(Word(i))
		}
		reason := o.finishReason()
		msg := o.envelope(false, o.textChoice(b.String(), &reason, true))
		msg.Usage = o.usage(&pr.done)
		msg.KVTransferParams = o.transfer
		writeJSON(w, http.StatusOK, msg)
		return
	}
}

// sse writes server-sent events and remembers the first write error, after
// which every write is skipped: the client is gone.
type sse struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

// send writes v as one SSE data event.
func (s *sse) send(v any) {
	if s.err == nil {
		data, _ := json.Marshal(v)
		_, s.err = s.w.Write(slices.Concat([]byte("data: "), data, []byte("\n\n")))
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
