package oaiedge

import (
	"errors"
	"strconv"
)

// Errors of Parse. Each refusal is an *Error whose Kind is one of them, so
// that the edges map a refusal to their own sentinels and status in one
// place.
var (
	// ErrInvalid: a parameter is missing, of the wrong type or out of
	// range. ErrMalformed (the body is not JSON) is its sibling.
	ErrInvalid = errors.New("oaiedge: invalid request")
	// ErrPromptTooLong: the prompt is over Options.MaxPromptTokens.
	ErrPromptTooLong = errors.New("oaiedge: prompt too long")
)

// Error is a refused request, ready for the OpenAI error body.
type Error struct {
	// Kind is ErrMalformed, ErrInvalid or ErrPromptTooLong.
	Kind error
	// Param names the offending parameter ("messages[2].content",
	// "kvrouter.token_ids"), or is empty when no parameter is to blame.
	Param string
	// Msg is the message for the client.
	Msg string
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns Kind, so that errors.Is sees the class of the refusal.
func (e *Error) Unwrap() error { return e.Kind }

// badParam refuses param as invalid with msg.
func badParam(param, msg string) error {
	return &Error{Kind: ErrInvalid, Param: param, Msg: msg}
}

// malformed refuses a body that is not JSON.
func malformed() error {
	return &Error{Kind: ErrMalformed, Msg: "malformed JSON in the request body"}
}

// tooLong refuses a prompt over limit tokens, naming param.
func tooLong(param string, limit int) error {
	return &Error{Kind: ErrPromptTooLong, Param: param,
		Msg: "the prompt exceeds the limit of " + strconv.Itoa(limit) + " tokens"}
}

// wrap turns a scanner error into an *Error naming param: malformed JSON
// names no parameter, a value of the wrong type is refused with typeMsg,
// and an *Error passes unchanged.
func (ps *parser) wrap(err error, param, typeMsg string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errSyntax):
		return malformed()
	case errors.Is(err, errType):
		return badParam(param, typeMsg)
	case errors.Is(err, errTooLong):
		return tooLong(param, ps.o.MaxPromptTokens)
	case errors.Is(err, errUTF8):
		return badParam(param, param+" is not valid UTF-8")
	}
	return err
}
