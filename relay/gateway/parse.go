package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// endpoint names the two proxied OpenAI endpoints.
type endpoint uint8

const (
	endpointChat endpoint = iota
	endpointCompletions
)

// path is the endpoint's path on gateways and router nodes alike.
func (e endpoint) path() string {
	if e == endpointChat {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

// promptParam names the endpoint's prompt parameter.
func (e endpoint) promptParam() string {
	if e == endpointChat {
		return "messages"
	}
	return "prompt"
}

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

// wireRequest is the subset of the body the gateway reads.
type wireRequest struct {
	Model     string          `json:"model"`
	Prompt    json.RawMessage `json:"prompt"`
	Messages  json.RawMessage `json:"messages"`
	CacheSalt string          `json:"cache_salt"`
	Kvrouter  *struct {
		TokenIDs json.RawMessage `json:"token_ids"`
		LoRA     string          `json:"lora"`
	} `json:"kvrouter"`
}

// parseRequest reads the fields the decision needs and checks the ones
// every router node would refuse, so that a bad request is answered here
// instead of crossing the WAN. Errors wrap ErrInvalidRequest or
// ErrPromptTooLong and name the parameter.
func parseRequest(body []byte, ep endpoint, limit int) (request, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return request{}, decodeError(err)
	}
	r := request{Model: w.Model, CacheSalt: w.CacheSalt}
	if r.Model == "" {
		return r, badParam("model", "model is required")
	}
	if k := w.Kvrouter; k != nil {
		r.LoRA = k.LoRA
		if !isNull(k.TokenIDs) {
			// The extension's ids are the prompt's tokens for routing; the
			// prompt is then only checked, never decoded.
			var err error
			if r.Tokens, err = extensionTokens(k.TokenIDs, limit); err != nil {
				return r, err
			}
			return r, checkPrompt(w, ep)
		}
	}
	var err error
	if ep == endpointChat {
		err = checkMessages(w.Messages)
	} else {
		r.Tokens, err = promptTokens(w.Prompt, limit)
	}
	return r, err
}

// extensionTokens reads kvrouter.token_ids, which must not be empty.
func extensionTokens(raw json.RawMessage, limit int) ([]uint32, error) {
	const param = "kvrouter.token_ids"
	ids, err := parseTokens(raw, limit)
	if err != nil {
		return nil, tokenError(err, param, param+" must be an array of integers in [0, 2^32)", limit)
	}
	if len(ids) == 0 {
		return nil, badParam(param, param+" must not be empty")
	}
	return ids, nil
}

// checkPrompt checks the prompt parameter of a request whose tokens came
// from the extension.
func checkPrompt(w wireRequest, ep endpoint) error {
	if ep == endpointChat {
		return checkMessages(w.Messages)
	}
	if isNull(w.Prompt) {
		return badParam("prompt", "prompt is required")
	}
	return nil
}

// tokenError maps a parseTokens error to a request error naming param.
func tokenError(err error, param, msg string, limit int) error {
	if errors.Is(err, ErrPromptTooLong) {
		return &requestError{kind: ErrPromptTooLong, param: param,
			msg: "the prompt exceeds the limit of " + strconv.Itoa(limit) + " tokens"}
	}
	return badParam(param, "%s", msg)
}

// decodeError turns a json error into a request error naming the field.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return badParam("", "the request body must be a JSON object")
		}
		return badParam(te.Field, "%s must not be a JSON %s", te.Field, te.Value)
	}
	return badParam("", "malformed JSON in the request body")
}

// isNull reports an absent or null member.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// checkMessages requires a non-empty array; the messages themselves are
// the router node's to validate.
func checkMessages(raw json.RawMessage) error {
	if isNull(raw) {
		return badParam("messages", "messages is required")
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return badParam("messages", "messages must be an array of message objects")
	}
	if len(msgs) == 0 {
		return badParam("messages", "messages must not be empty")
	}
	return nil
}

// promptTokens reads a completions prompt: a string, an array of strings,
// an array of token ids or an array of token id arrays, told apart by
// their first bytes so that the prompt is decoded once. It returns the
// token ids of the first prompt, or nil for text.
func promptTokens(raw json.RawMessage, limit int) ([]uint32, error) {
	const msg = "prompt must be a string, an array of strings, an array of token ids or an array of token id arrays"
	if isNull(raw) {
		return nil, badParam("prompt", "prompt is required")
	}
	var err error
	var tokens []uint32
	switch first, elem := shape(raw); {
	case first == '"':
		var s string
		if err = json.Unmarshal(raw, &s); err == nil {
			return nil, nonEmpty(len(s))
		}
	case first == '[' && elem == '"':
		var ss []string
		if err = json.Unmarshal(raw, &ss); err == nil {
			return nil, nonEmpty(len(ss[0]))
		}
	case first == '[' && elem == '[':
		var batch []json.RawMessage
		if err = json.Unmarshal(raw, &batch); err == nil {
			return firstTokens(batch, limit)
		}
	case first == '[' && elem == ']':
		return nil, nonEmpty(0)
	case first == '[':
		if tokens, err = parseTokens(raw, limit); err == nil {
			return tokens, nil
		}
		return nil, tokenError(err, "prompt", msg, limit)
	}
	return nil, badParam("prompt", msg)
}

// firstTokens reads a batch of token id arrays, routed on the first; the
// others are checked against the same rules.
func firstTokens(batch []json.RawMessage, limit int) ([]uint32, error) {
	const msg = "prompt must be an array of token id arrays"
	var first []uint32
	for i, raw := range batch {
		ids, err := parseTokens(raw, limit)
		if err != nil {
			return nil, tokenError(err, "prompt", msg, limit)
		}
		if i == 0 {
			first = ids
		}
	}
	return first, nonEmpty(len(first))
}

// shape returns the first byte of a JSON value and, for an array, the
// first byte of its first element (']' when empty).
func shape(raw []byte) (first, elem byte) {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0, 0
	}
	rest := bytes.TrimLeft(raw[1:], " \t\r\n")
	if raw[0] == '[' && len(rest) > 0 {
		elem = rest[0]
	}
	return raw[0], elem
}

// nonEmpty refuses an empty prompt.
func nonEmpty(n int) error {
	if n == 0 {
		return badParam("prompt", "prompt must not be empty")
	}
	return nil
}
