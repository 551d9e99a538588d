package gateway

import (
	"errors"
	"sync"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
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

// path is the endpoint's path on gateways and router nodes alike.
func (e endpoint) path() string { return e.edge().Path() }

// request is what the decision needs of a body; the body itself is
// forwarded unchanged.
type request struct {
	Model string
	// Tokens are the prompt's token ids when the client sent them
	// (kvrouter.token_ids, or a completions prompt of token ids); nil for
	// text prompts, which the gateway cannot hash into engine blocks.
	Tokens          []uint32
	LoRA, CacheSalt string
}

// parseRequest reads the fields the decision needs and checks the ones
// every router node would refuse, so that a bad request is answered here
// instead of crossing the WAN. It parses with oaiedge, the router
// node's parser, so both refuse the same bodies with the same parameter
// names. Errors wrap ErrInvalidRequest or ErrPromptTooLong and name the
// parameter.
func parseRequest(body []byte, ep endpoint, limit int) (request, error) {
	o := oaiedge.Options{MaxPromptTokens: limit}
	r, err := oaiedge.Parse(body, ep.edge(), o)
	if err != nil {
		return request{}, requestErr(err)
	}
	return request{Model: r.Model, Tokens: r.Tokens, LoRA: r.LoRA, CacheSalt: r.CacheSalt}, nil
}

// tokenBufs recycles the token id buffers of parseRequestPooled: a
// 12,288-token prompt's ids are 48 KiB that the decision reads once, and
// a fresh slice per request would be most of the gateway's garbage.
var tokenBufs = sync.Pool{New: func() any { return new([]uint32) }}

// parseRequestPooled is parseRequest with the token ids parsed into a
// buffer from tokenBufs. The request's Tokens alias it: the caller hands
// the buffer back with releaseTokens once it no longer reads them.
func parseRequestPooled(body []byte, ep endpoint, limit int) (request, *[]uint32, error) {
	buf := tokenBufs.Get().(*[]uint32)
	o := oaiedge.Options{MaxPromptTokens: limit}
	r, err := oaiedge.ParseReusing(body, ep.edge(), o, (*buf)[:0])
	if s := r.Scratch(); s != nil {
		*buf = s
	}
	if err != nil {
		releaseTokens(buf)
		return request{}, nil, requestErr(err)
	}
	return request{Model: r.Model, Tokens: r.Tokens, LoRA: r.LoRA, CacheSalt: r.CacheSalt}, buf, nil
}

// maxPooledTokens bounds the buffers kept for reuse: a rare 1M-token
// prompt should not pin 4 MiB per pooled buffer.
const maxPooledTokens = 64 << 10

// releaseTokens returns a buffer of parseRequestPooled; nil is ignored.
func releaseTokens(buf *[]uint32) {
	if buf != nil && cap(*buf) <= maxPooledTokens {
		tokenBufs.Put(buf)
	}
}

// requestErr turns a refusal of the parser into the gateway's request
// error, which errorTable maps: a prompt over the limit is
// ErrPromptTooLong, anything else ErrInvalidRequest; the parameter and
// message are kept.
func requestErr(err error) error {
	var e *oaiedge.Error
	if !errors.As(err, &e) {
		return err
	}
	kind := ErrInvalidRequest
	if errors.Is(e.Kind, oaiedge.ErrPromptTooLong) {
		kind = ErrPromptTooLong
	}
	return &requestError{kind: kind, param: e.Param, msg: e.Msg}
}
