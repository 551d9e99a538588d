package oaiedge

import "math"

// Parse reads the body of an ep request under o. A refusal is an *Error.
func Parse(body []byte, ep Endpoint, o Options) (Request, error) {
	return parse(body, ep, o, nil, false)
}

// parser is one parse in progress. It lives on the caller's stack.
type parser struct {
	s    Scanner
	ep   Endpoint
	o    Options
	r    Request
	text []byte
	// reuse says the first token array goes into r.scratch; used, that
	// it did.
	reuse, used bool

	hasPrompt        bool
	instructions     []byte
	extTokens        []uint32
	maxTokens        int
	maxCompletion    int
	hasMaxCompletion bool
}

func parse(body []byte, ep Endpoint, o Options, scratch []uint32, reuse bool) (Request, error) {
	if o.TextBytesPerToken <= 0 {
		o.TextBytesPerToken = DefaultTextBytesPerToken
	}
	ps := parser{s: Scanner{b: body}, ep: ep, o: o, reuse: reuse}
	ps.r.Endpoint, ps.r.bytesPerToken, ps.r.scratch = ep, o.TextBytesPerToken, scratch
	if err := ps.body(); err != nil {
		return Request{}, err
	}
	return ps.r, nil
}

// body reads the whole body.
func (ps *parser) body() error {
	err := ps.s.Object(ps.field)
	if err == nil {
		err = ps.s.end()
	}
	if err != nil {
		return ps.wrap(err, "", "the request body must be a JSON object")
	}
	return ps.finish()
}

// tokens parses a token id array, into the scratch buffer if it is the
// first array of the body.
func (ps *parser) tokens() ([]uint32, error) {
	if !ps.reuse || ps.used {
		return ps.s.tokenArray(nil, ps.o.MaxPromptTokens)
	}
	t, err := ps.s.tokenArray(ps.r.scratch[:0], ps.o.MaxPromptTokens)
	if t != nil {
		ps.used, ps.r.scratch = true, t
	}
	return t, err
}

// field reads one top-level member.
func (ps *parser) field(key []byte) error {
	s := &ps.s
	if s.Null() {
		return nil // an explicit null is an omitted optional field
	}
	var err error
	switch string(key) {
	case "model":
		ps.r.Model, err = s.str()
		return ps.wrap(err, "model", "model must be a string")
	case "stream":
		ps.r.Stream, err = s.boolean()
		return ps.wrap(err, "stream", "stream must be a boolean")
	case "stream_options":
		return ps.wrap(s.Object(ps.streamOption), "stream_options", "stream_options must be an object")
	case "max_tokens":
		ps.maxTokens, err = ps.count()
		return ps.wrap(err, "max_tokens", "max_tokens must be a non-negative integer")
	case "max_completion_tokens", "max_output_tokens":
		// max_output_tokens is the Responses API's name of the cap.
		ps.maxCompletion, err = ps.count()
		if ps.hasMaxCompletion = err == nil; err == nil {
			return nil
		}
		return ps.wrap(err, string(key), string(key)+" must be a non-negative integer")
	case "prompt_cache_key":
		ps.r.PromptCacheKey, err = s.str()
		return ps.wrap(err, "prompt_cache_key", "prompt_cache_key must be a string")
	case "user":
		ps.r.User, err = s.str()
		return ps.wrap(err, "user", "user must be a string")
	case "instructions":
		if ps.ep != Responses {
			return s.Skip()
		}
		ps.instructions, err = s.text()
		return ps.wrap(err, "instructions", "instructions must be a string")
	case "cache_salt":
		ps.r.CacheSalt, err = s.str()
		return ps.wrap(err, "cache_salt", "cache_salt must be a string")
	case "kvrouter":
		return ps.wrap(s.Object(ps.extension), "kvrouter", "kvrouter must be an object")
	case "nvext":
		return ps.nvext()
	}
	if p := ps.ep.PromptParam(); p != "" && string(key) == p {
		return ps.promptField()
	}
	return s.Skip()
}

// nvext keeps the raw "nvext" value, of any type: its reader, not the
// parse, says what a value that is not an object means.
func (ps *parser) nvext() error {
	raw, err := ps.s.Raw()
	if err != nil {
		return ps.wrap(err, "nvext", "nvext must be a JSON value")
	}
	ps.r.NVExt = raw
	return nil
}

// promptField reads the endpoint's prompt parameter.
func (ps *parser) promptField() error {
	ps.hasPrompt = true
	switch ps.ep {
	case Chat:
		return ps.messages()
	case Responses:
		return ps.responsesInput()
	}
	return ps.prompt()
}

// count reads a non-negative int32 count.
func (ps *parser) count() (int, error) {
	v, err := ps.s.Uint(math.MaxInt32)
	return int(v), err
}

// streamOption reads one member of stream_options.
func (ps *parser) streamOption(key []byte) error {
	if string(key) != "include_usage" || ps.s.Null() {
		return ps.s.Skip()
	}
	var err error
	ps.r.IncludeUsage, err = ps.s.boolean()
	return ps.wrap(err, "stream_options.include_usage", "stream_options.include_usage must be a boolean")
}

// extension reads one member of the "kvrouter" extension object.
func (ps *parser) extension(key []byte) error {
	s := &ps.s
	if s.Null() {
		return nil
	}
	var err error
	switch string(key) {
	case "token_ids":
		const param = "kvrouter.token_ids"
		ps.extTokens, err = ps.tokens()
		if err == nil && len(ps.extTokens) == 0 {
			return badParam(param, param+" must not be empty")
		}
		return ps.wrap(err, param, param+" must be an array of integers in [0, 2^32)")
	case "lora":
		ps.r.LoRA, err = s.str()
		return ps.wrap(err, "kvrouter.lora", "kvrouter.lora must be a string")
	}
	return s.Skip()
}

// finish applies the cross-field rules once the whole body
// is read.
func (ps *parser) finish() error {
	r := &ps.r
	if r.Model == "" {
		return badParam("model", "model is required")
	}
	if p := ps.ep.PromptParam(); !ps.hasPrompt && p != "" {
		return badParam(p, p+" is required")
	}
	if len(ps.instructions) > 0 {
		// The instructions come first in what the engine renders, whatever
		// their place in the body.
		ps.text = append(append(append([]byte("system\n"), ps.instructions...), '\n'), ps.text...)
	}
	r.MaxTokens = ps.maxTokens
	if ps.hasMaxCompletion {
		r.MaxTokens = ps.maxCompletion
	}
	if ps.extTokens != nil {
		r.Tokens = ps.extTokens
	}
	if r.Tokens == nil {
		r.Text = string(ps.text)
	}
	if r.PromptTokens() > ps.o.MaxPromptTokens {
		return tooLong(ps.ep.PromptParam(), ps.o.MaxPromptTokens)
	}
	return nil
}
