package oaiedge

import (
	"errors"
	"unicode"
	"unicode/utf8"
)

// deferred holds what GatewayRules report only once the whole body is
// read, where encoding/json, which the gateway's rules come from, would
// have reported it: it validates the whole document before decoding, and
// then keeps the first type error while it decodes the rest.
type deferred struct {
	// typeErr is the first value of the wrong type, in document order.
	typeErr error
	// extErr and promptErr refuse the last occurrence of
	// kvrouter.token_ids and of the prompt parameter.
	extErr, promptErr error
	// hasExt says kvrouter.token_ids is present and not null.
	hasExt bool
}

// gatewayFields and extensionFields are the keys GatewayRules read.
var (
	gatewayFields   = [...]string{"model", "cache_salt", "kvrouter", "prompt", "messages"}
	extensionFields = [...]string{"token_ids", "lora"}
)

// gatewayBody reads the body under GatewayRules. A null body is an empty
// object, as encoding/json decodes it.
func (ps *parser) gatewayBody() error {
	s := &ps.s
	var err error
	switch {
	case s.peek() == '{':
		err = s.Object(ps.gatewayField)
	case s.Null():
	default:
		if err = s.Skip(); err == nil {
			ps.g.typeErr = badParam("", "the request body must be a JSON object")
		}
	}
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return malformed() // every refusal but malformed JSON is deferred
	}
	return ps.gatewayFinish()
}

// gatewayField reads one top-level member under GatewayRules; the other
// endpoint's prompt parameter is skipped like any unknown key.
func (ps *parser) gatewayField(key []byte) error {
	switch fieldName(key, gatewayFields[:]) {
	case "model":
		return ps.gatewayString(&ps.r.Model, "model")
	case "cache_salt":
		return ps.gatewayString(&ps.r.CacheSalt, "cache_salt")
	case "kvrouter":
		return ps.gatewayExtension()
	case "prompt":
		if ps.ep == Completions {
			return ps.gatewayPrompt()
		}
	case "messages":
		if ps.ep == Chat {
			return ps.gatewayMessages()
		}
	}
	return ps.s.Skip()
}

// gatewayString reads a string field; null leaves it as it was.
func (ps *parser) gatewayString(dst *string, param string) error {
	if ps.s.Null() {
		return nil
	}
	v, err := ps.s.str()
	if err == nil {
		*dst = v
	}
	return ps.mismatch(err, param, "a string")
}

// mismatch records the first value of the wrong type (which the scanner
// has skipped), refusing param as not of type want, and lets the parse go
// on; malformed JSON is returned.
func (ps *parser) mismatch(err error, param, want string) error {
	if !errors.Is(err, errType) {
		return err
	}
	if ps.g.typeErr == nil {
		ps.g.typeErr = badParam(param, param+" must be "+want)
	}
	return nil
}

// gatewayExtension reads the "kvrouter" object. A null drops what an
// earlier occurrence set.
func (ps *parser) gatewayExtension() error {
	s := &ps.s
	switch {
	case s.Null():
		ps.dropExtension()
		ps.r.LoRA = ""
		return nil
	case s.peek() != '{':
		return ps.mismatch(s.wrongType(), "kvrouter", "an object")
	}
	return s.Object(func(key []byte) error {
		switch fieldName(key, extensionFields[:]) {
		case "token_ids":
			return ps.gatewayTokenIDs()
		case "lora":
			return ps.gatewayString(&ps.r.LoRA, "kvrouter.lora")
		}
		return s.Skip()
	})
}

// dropExtension forgets kvrouter.token_ids.
func (ps *parser) dropExtension() {
	ps.g.hasExt, ps.g.extErr, ps.extTokens = false, nil, nil
}

// gatewayTokenIDs reads kvrouter.token_ids, which must be a non-empty
// array of token ids within the limit.
func (ps *parser) gatewayTokenIDs() error {
	const param = "kvrouter.token_ids"
	ps.dropExtension()
	if ps.s.Null() {
		return nil
	}
	ps.g.hasExt = true
	var t []uint32
	refusal, err := ps.settle(func() (err error) {
		t, err = ps.tokens()
		return err
	})
	switch {
	case refusal != nil:
		ps.g.extErr = ps.wrap(refusal, param, param+" must be an array of integers in [0, 2^32)")
	case len(t) == 0:
		ps.g.extErr = badParam(param, param+" must not be empty")
	default:
		ps.extTokens = t
	}
	return err
}

// gatewayPrompt reads a completions prompt; a refusal is kept for
// gatewayFinish, which ignores it when kvrouter.token_ids is given.
func (ps *parser) gatewayPrompt() error {
	ps.r.Tokens, ps.g.promptErr = nil, nil
	if ps.hasPrompt = !ps.s.Null(); !ps.hasPrompt {
		return nil
	}
	refusal, err := ps.settle(ps.prompt)
	if refusal != nil {
		ps.r.Tokens, ps.g.promptErr = nil, refusal
	}
	return err
}

// gatewayMessages checks that messages is a non-empty array; the
// messages themselves are the router node's to validate.
func (ps *parser) gatewayMessages() error {
	s := &ps.s
	ps.g.promptErr = nil
	if ps.hasPrompt = !s.Null(); !ps.hasPrompt {
		return nil
	}
	if s.peek() != '[' {
		ps.g.promptErr = badParam("messages", "messages must be an array of message objects")
		return s.Skip()
	}
	n := 0
	err := s.Array(func(int) error {
		n++
		return s.Skip()
	})
	if n == 0 {
		ps.g.promptErr = badParam("messages", "messages must not be empty")
	}
	return err
}

// settle runs read on the value at the cursor. A refusal other than
// malformed JSON is returned as refusal, and the value is skipped from its
// start instead, so that the rest of the body is still validated; err is
// malformed JSON, from read or from the skip.
func (ps *parser) settle(read func() error) (refusal, err error) {
	start := ps.s.i
	if err = read(); err == nil || errors.Is(err, errSyntax) {
		return nil, err
	}
	ps.s.i = start
	return err, ps.s.Skip()
}

// gatewayFinish reports the first refusal in encoding/json's order and
// settles the tokens: the extension's when given, else the prompt's.
func (ps *parser) gatewayFinish() error {
	g, pp := &ps.g, ps.ep.PromptParam()
	switch {
	case g.typeErr != nil:
		return g.typeErr
	case ps.r.Model == "":
		return badParam("model", "model is required")
	case g.extErr != nil:
		return g.extErr
	case !ps.hasPrompt:
		return badParam(pp, pp+" is required")
	case g.hasExt:
		ps.r.Tokens = ps.extTokens
		if ps.ep == Completions {
			return nil // the extension's ids are what routing reads
		}
	}
	return g.promptErr
}

// fieldName returns the name in names that key selects the way
// encoding/json matches an object key to a struct field: exactly, else
// with both folded to upper case rune by rune; "" when none does.
func fieldName(key []byte, names []string) string {
	for _, n := range names {
		if string(key) == n {
			return n
		}
	}
	for _, n := range names {
		if foldEqual(key, n) {
			return n
		}
	}
	return ""
}

// foldEqual reports whether key equals the ASCII name with each rune
// folded by unicode.ToUpper, as encoding/json folds names (so "ſ", the
// long s, matches "s").
func foldEqual(key []byte, name string) bool {
	j := 0
	for i := 0; i < len(key); j++ {
		r, n := rune(key[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRune(key[i:])
		}
		i += n
		if j >= len(name) || unicode.ToUpper(r) != unicode.ToUpper(rune(name[j])) {
			return false
		}
	}
	return j == len(name)
}
