package tokenize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/ardanlabs/jinja"
)

// ChatRequest is a conversation to render with the model's chat template.
type ChatRequest struct {
	// Messages is the OpenAI-style messages array, passed to the template
	// as is: object key order is kept, since templates that print objects
	// with tojson print them in that order.
	Messages json.RawMessage
	// Tools is the OpenAI-style tools array, or empty for none.
	Tools json.RawMessage
	// AddGenerationPrompt ends the prompt with the opening of an assistant
	// turn, as a request for a completion does.
	AddGenerationPrompt bool
	// Kwargs are extra template variables (chat_template_kwargs, such as
	// enable_thinking); they cannot replace the ones above.
	Kwargs map[string]any
}

// chatTemplates are a model's compiled templates by name.
type chatTemplates struct {
	byName map[string]*jinja.Template
}

func compileTemplates(src map[string]string) (*chatTemplates, error) {
	if len(src) == 0 {
		return nil, nil
	}
	c := &chatTemplates{byName: make(map[string]*jinja.Template, len(src))}
	for name, s := range src {
		tmpl, err := jinja.Compile(s)
		if err != nil {
			return nil, &FileError{Key: "chat_template", Err: fmt.Errorf("%w: template %q: %v", ErrTemplate, name, err)}
		}
		c.byName[name] = tmpl
	}
	return c, nil
}

// pick chooses the template as the reference does: "tool_use" when tools
// are given and the model has one, else "default".
func (c *chatTemplates) pick(tools bool) (*jinja.Template, bool) {
	if c == nil {
		return nil, false
	}
	if tools {
		if t, ok := c.byName["tool_use"]; ok {
			return t, true
		}
	}
	t, ok := c.byName["default"]
	return t, ok
}

// ApplyChatTemplate renders a conversation into the model's prompt text.
// The template sees messages, tools (none when absent),
// add_generation_prompt, the special tokens of tokenizer_config.json
// (bos_token, eos_token, ...), and the functions raise_exception (which
// fails the render with ErrTemplate) and strftime_now (the local time in a
// strftime format).
func (t *Tokenizer) ApplyChatTemplate(req ChatRequest) (string, error) {
	hasTools := len(bytes.TrimSpace(req.Tools)) > 0 && string(bytes.TrimSpace(req.Tools)) != "null"
	tmpl, ok := t.chat.pick(hasTools)
	if !ok {
		return "", ErrNoChatTemplate
	}
	vars, err := t.chatVars(req, hasTools)
	if err != nil {
		return "", err
	}
	out, err := tmpl.RenderValues(vars)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	return out, nil
}

// EncodeChat renders a conversation and appends its token ids to dst. The
// special tokens come from the template, so none are added around it.
func (t *Tokenizer) EncodeChat(req ChatRequest, dst []uint32) ([]uint32, error) {
	s, err := t.ApplyChatTemplate(req)
	if err != nil {
		return dst, err
	}
	return t.Encode(s, false, dst), nil
}

func (t *Tokenizer) chatVars(req ChatRequest, hasTools bool) (map[string]jinja.Value, error) {
	vars := make(map[string]jinja.Value, 8+len(req.Kwargs))
	for k, v := range req.Kwargs {
		vars[k] = jinja.FromGoValue(v)
	}
	msgs, err := jsonValue(req.Messages)
	if err != nil || !msgs.IsList() {
		return nil, fmt.Errorf("%w: messages must be a JSON array: %v", ErrMessages, err)
	}
	vars["messages"] = msgs
	vars["tools"] = jinja.None()
	if hasTools {
		tools, err := jsonValue(req.Tools)
		if err != nil || !tools.IsList() {
			return nil, fmt.Errorf("%w: tools must be a JSON array: %v", ErrMessages, err)
		}
		vars["tools"] = tools
	}
	vars["add_generation_prompt"] = jinja.NewBool(req.AddGenerationPrompt)
	for k, v := range t.cfg.specialTokens {
		vars[k] = jinja.NewString(v)
	}
	vars["strftime_now"] = jinja.NewCallable("strftime_now", t.strftimeNow)
	vars["raise_exception"] = jinja.NewCallable("raise_exception", raiseException)
	return vars, nil
}

// errRaised is the error of a template's raise_exception call.
var errRaised = errors.New("raise_exception")

func raiseException(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	msg := "no message"
	if len(args) > 0 {
		msg = args[0].String()
	}
	return jinja.Undefined(), fmt.Errorf("%w: %s", errRaised, msg)
}

func (t *Tokenizer) strftimeNow(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 1 || !args[0].IsString() {
		return jinja.Undefined(), errors.New("strftime_now takes one format string")
	}
	return jinja.NewString(strftime(t.now(), args[0].AsString())), nil
}

// jsonValue decodes JSON into template values, keeping object key order
// and the distinction between integers and floats. Valid input, the usual
// case, is walked directly (see jsonWalker); invalid input goes through
// the token decoder, whose error says what is wrong.
func jsonValue(data []byte) (jinja.Value, error) {
	if json.Valid(data) {
		w := jsonWalker{data: data}
		return w.value(0)
	}
	return jsonValueDecoder(data)
}

// jsonValueDecoder is jsonValue on encoding/json's token stream: three
// passes over each string and a copy of the input, but it is the one that
// explains a syntax error.
func jsonValueDecoder(data []byte) (jinja.Value, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := decodeValue(d)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := d.Token(); err != io.EOF {
		return jinja.Undefined(), errors.New("trailing data after JSON value")
	}
	return v, nil
}

// maxJSONDepth bounds nesting so that hostile input cannot exhaust the
// stack.
const maxJSONDepth = 64

func decodeValue(d *json.Decoder) (jinja.Value, error) {
	return decodeDepth(d, 0)
}

func decodeDepth(d *json.Decoder, depth int) (jinja.Value, error) {
	if depth > maxJSONDepth {
		return jinja.Undefined(), errJSONDepth
	}
	tok, err := d.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			var items []jinja.Value
			for d.More() {
				it, err := decodeDepth(d, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, it)
			}
			_, err := d.Token()
			return jinja.NewList(items), err
		}
		obj := jinja.NewDict()
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return jinja.Undefined(), err
			}
			val, err := decodeDepth(d, depth+1)
			if err != nil {
				return jinja.Undefined(), err
			}
			obj.AsDict().Set(k.(string), val)
		}
		_, err := d.Token()
		return obj, err
	default:
		return jinja.FromGoValue(v), nil
	}
}
