package frontend

import (
	"errors"
	"math"
	"strconv"

	"github.com/kvrouter/kvrouter/node/dispatch"
)

// endpoint names the two proxied OpenAI endpoints.
type endpoint uint8

const (
	endpointChat endpoint = iota
	endpointCompletions
)

// path is the endpoint's path, on the node and on the engine alike.
func (e endpoint) path() string {
	if e == endpointChat {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

// promptParam is the name of the endpoint's prompt parameter.
func (e endpoint) promptParam() string {
	if e == endpointChat {
		return "messages"
	}
	return "prompt"
}

// parsed is what routing needs of a request body; the body itself is
// forwarded unchanged.
type parsed struct {
	Model        string
	Stream       bool
	IncludeUsage bool
	// MaxTokens is max_completion_tokens, else max_tokens, else 0.
	MaxTokens int
	// Tokens are the prompt's token ids when the client sent them; Text is
	// the prompt text otherwise.
	Tokens []uint32
	Text   string
	// LoRA (kvrouter.lora) and CacheSalt (cache_salt) seed the block hashes.
	LoRA, CacheSalt string

	hasPrompt bool
	extTokens []uint32
	// buf is the pooled buffer the first token array was parsed into
	// (nil when the parse used none); first is that array.
	buf             *[]uint32
	first           []uint32
	maxTokens       int
	maxCompletion   int
	hasMaxCompleted bool
}

// PromptTokens is the prompt length in tokens: exact for token ids,
// estimated at TextBytesPerToken for text.
func (p *parsed) PromptTokens() int {
	if p.Tokens != nil {
		return len(p.Tokens)
	}
	return (len(p.Text) + TextBytesPerToken - 1) / TextBytesPerToken
}

// parser reads one body.
type parser struct {
	s     scanner
	ep    endpoint
	limit int
	p     parsed
	text  []byte
}

// parseRequest parses the body of ep, refusing prompts over limit tokens.
// Errors are *requestError values wrapping ErrInvalidRequest or
// dispatch.ErrPromptTooLong.
func parseRequest(body []byte, ep endpoint, limit int) (*parsed, error) {
	return parseRequestPooled(body, ep, limit, nil)
}

// parseRequestPooled is parseRequest parsing the first token array of the
// body into buf, a pooled buffer; the result owns buf even on error, and
// release gives it back.
func parseRequestPooled(body []byte, ep endpoint, limit int, buf *[]uint32) (*parsed, error) {
	ps := &parser{s: scanner{b: body}, ep: ep, limit: limit}
	ps.p.buf = buf
	err := ps.s.object(ps.field)
	if err == nil {
		err = ps.s.end()
	}
	if err != nil {
		ps.p.release()
		return nil, ps.wrap(err, "", "the request body must be a JSON object")
	}
	p, err := ps.finish()
	if err != nil {
		ps.p.release()
	}
	return p, err
}

// tokens parses a token id array, into the pooled buffer if it is the
// first array of the body.
func (ps *parser) tokens() ([]uint32, error) {
	p := &ps.p
	if p.buf == nil || p.first != nil {
		return ps.s.tokenArray(nil, ps.limit)
	}
	t, err := ps.s.tokenArray((*p.buf)[:0], ps.limit)
	if t != nil {
		p.first = t
	}
	return t, err
}

// release gives the pooled token buffer back; the parsed tokens must no
// longer be used. Later calls do nothing.
func (p *parsed) release() {
	if p == nil || p.buf == nil {
		return
	}
	putTokens(p.buf, p.first)
	p.buf, p.first = nil, nil
}

// wrap turns scanner errors into request errors naming param.
func (ps *parser) wrap(err error, param, typeMsg string) error {
	switch {
	case errors.Is(err, errSyntax):
		return badParam("", "malformed JSON in the request body")
	case errors.Is(err, errType):
		return badParam(param, "%s", typeMsg)
	case errors.Is(err, errTooLong):
		return &requestError{kind: dispatch.ErrPromptTooLong, param: param,
			msg: "the prompt exceeds the limit of " + strconv.Itoa(ps.limit) + " tokens"}
	}
	return err
}

// field reads one top-level member.
func (ps *parser) field(key []byte) error {
	s := &ps.s
	if s.null() {
		return nil // an explicit null is an omitted optional field
	}
	var err error
	switch string(key) {
	case "model":
		ps.p.Model, err = s.str()
		return ps.wrap(err, "model", "model must be a string")
	case "stream":
		ps.p.Stream, err = s.boolean()
		return ps.wrap(err, "stream", "stream must be a boolean")
	case "stream_options":
		return ps.wrap(s.object(ps.streamOption), "stream_options", "stream_options must be an object")
	case "max_tokens":
		ps.p.maxTokens, err = ps.count()
		return ps.wrap(err, "max_tokens", "max_tokens must be a non-negative integer")
	case "max_completion_tokens":
		ps.p.maxCompletion, err = ps.count()
		ps.p.hasMaxCompleted = err == nil
		return ps.wrap(err, "max_completion_tokens", "max_completion_tokens must be a non-negative integer")
	case "cache_salt":
		ps.p.CacheSalt, err = s.str()
		return ps.wrap(err, "cache_salt", "cache_salt must be a string")
	case "kvrouter":
		return ps.wrap(s.object(ps.extension), "kvrouter", "kvrouter must be an object")
	case ps.ep.promptParam():
		ps.p.hasPrompt = true
		if ps.ep == endpointChat {
			return ps.messages()
		}
		return ps.prompt()
	}
	return s.skip()
}

// count reads a non-negative int32 count.
func (ps *parser) count() (int, error) {
	v, err := ps.s.uint(math.MaxInt32)
	return int(v), err
}

// streamOption reads one member of stream_options.
func (ps *parser) streamOption(key []byte) error {
	if string(key) != "include_usage" || ps.s.null() {
		return ps.s.skip()
	}
	var err error
	ps.p.IncludeUsage, err = ps.s.boolean()
	return ps.wrap(err, "stream_options.include_usage", "stream_options.include_usage must be a boolean")
}

// extension reads one member of the "kvrouter" extension object.
func (ps *parser) extension(key []byte) error {
	s := &ps.s
	if s.null() {
		return nil
	}
	var err error
	switch string(key) {
	case "token_ids":
		ps.p.extTokens, err = ps.tokens()
		if err == nil && len(ps.p.extTokens) == 0 {
			return badParam("kvrouter.token_ids", "kvrouter.token_ids must not be empty")
		}
		return ps.wrap(err, "kvrouter.token_ids", "kvrouter.token_ids must be an array of integers in [0, 2^32)")
	case "lora":
		ps.p.LoRA, err = s.str()
		return ps.wrap(err, "kvrouter.lora", "kvrouter.lora must be a string")
	}
	return s.skip()
}

// finish applies the cross-field rules once the whole body is read.
func (ps *parser) finish() (*parsed, error) {
	p := &ps.p
	if p.Model == "" {
		return nil, badParam("model", "model is required")
	}
	if !p.hasPrompt {
		return nil, badParam(ps.ep.promptParam(), "%s is required", ps.ep.promptParam())
	}
	p.MaxTokens = p.maxTokens
	if p.hasMaxCompleted {
		p.MaxTokens = p.maxCompletion
	}
	if p.extTokens != nil {
		p.Tokens = p.extTokens
	}
	if p.Tokens != nil {
		p.Text = ""
	} else {
		p.Text = string(ps.text)
	}
	if p.PromptTokens() > ps.limit {
		return nil, ps.wrap(errTooLong, ps.ep.promptParam(), "")
	}
	return p, nil
}
