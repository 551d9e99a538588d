package frontend

import (
	"errors"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// endpoint names the two proxied OpenAI endpoints.
type endpoint uint8

const (
	endpointChat endpoint = iota
	endpointCompletions
)

// edge is the endpoint in the request parser's terms.
func (e endpoint) edge() oaiedge.Endpoint {
	if e == endpointChat {
		return oaiedge.Chat
	}
	return oaiedge.Completions
}

// path is the endpoint's path, on the node and on the engine alike.
func (e endpoint) path() string { return e.edge().Path() }

// parsed is what routing needs of a request body, parsed by oaiedge; the
// body itself is forwarded unchanged. buf is the pooled
// buffer the first token array was parsed into (nil when the parse used
// none).
type parsed struct {
	oaiedge.Request
	buf *[]uint32
}

// parseRequest parses the body of ep, refusing prompts over limit tokens.
// Errors are *requestError values wrapping ErrInvalidRequest or
// dispatch.ErrPromptTooLong.
func parseRequest(body []byte, ep endpoint, limit int) (*parsed, error) {
	return parseRequestPooled(body, ep, limit, nil)
}

// parseRequestPooled is parseRequest parsing the first token array of the
// body into buf, a pooled buffer; the result owns buf, and release gives
// it back. On error buf is back in the pool already.
func parseRequestPooled(body []byte, ep endpoint, limit int, buf *[]uint32) (*parsed, error) {
	o := oaiedge.Options{MaxPromptTokens: limit, TextBytesPerToken: TextBytesPerToken}
	if buf == nil {
		r, err := oaiedge.Parse(body, ep.edge(), o)
		if err != nil {
			return nil, requestErr(err)
		}
		return &parsed{Request: r}, nil
	}
	r, err := oaiedge.ParseReusing(body, ep.edge(), o, *buf)
	if err != nil {
		putTokens(buf, nil)
		return nil, requestErr(err)
	}
	return &parsed{Request: r, buf: buf}, nil
}

// release gives the pooled token buffer back, keeping the larger buffer
// when the parse outgrew it; the parsed tokens must no longer be used.
// Later calls do nothing.
func (p *parsed) release() {
	if p == nil || p.buf == nil {
		return
	}
	putTokens(p.buf, p.Scratch())
	p.buf = nil
}

// requestErr turns a refusal of the parser into the frontend's request
// error, which errorTable maps: a prompt over the limit is
// dispatch.ErrPromptTooLong, anything else ErrInvalidRequest; the
// parameter and message are kept.
func requestErr(err error) error {
	var e *oaiedge.Error
	if !errors.As(err, &e) {
		return err
	}
	kind := ErrInvalidRequest
	if errors.Is(e.Kind, oaiedge.ErrPromptTooLong) {
		kind = dispatch.ErrPromptTooLong
	}
	return &requestError{kind: kind, param: e.Param, msg: e.Msg}
}
