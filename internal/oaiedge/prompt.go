package oaiedge

import "strconv"

// messages reads chat messages and serialises their text for text-hash
// routing: for each message its role, a newline, the text of its content
// (a string, or the "text" of each {"type":"text"} part, concatenated), and
// a newline. Other message fields (names, tool calls, images) are validated
// as JSON but do not take part in routing.
func (ps *parser) messages() error {
	s := &ps.s
	ps.text = ps.text[:0]
	n := 0
	err := s.Array(func(i int) error {
		n++
		return ps.message(i)
	})
	if err != nil {
		return ps.wrap(err, "messages", "messages must be an array of message objects")
	}
	if n == 0 {
		return badParam("messages", "messages must not be empty")
	}
	return nil
}

// message reads messages[i].
func (ps *parser) message(i int) error {
	role, content, err := ps.roleContent("messages[" + strconv.Itoa(i) + "]")
	if err != nil {
		return err
	}
	ps.text = append(append(append(append(ps.text, role...), '\n'), content...), '\n')
	return nil
}

// roleContent reads the role and content of the object at param (a chat
// message or a Responses input item), skipping its other keys.
func (ps *parser) roleContent(param string) (role, content []byte, err error) {
	err = ps.s.Object(func(key []byte) error {
		var err error
		switch string(key) {
		case "role":
			role, err = ps.s.text()
			return ps.wrap(err, param+".role", param+".role must be a string")
		case "content":
			content, err = ps.content(param + ".content")
			return err
		}
		return ps.s.Skip()
	})
	if err != nil {
		return nil, nil, ps.wrap(err, param, param+" must be an object")
	}
	return role, content, nil
}

// content reads a message's content: a string, an array of parts, or null.
func (ps *parser) content(param string) ([]byte, error) {
	s := &ps.s
	switch s.peek() {
	case '"':
		b, err := s.text()
		return b, ps.wrap(err, param, "")
	case '[':
		var text []byte
		err := s.Array(func(int) error {
			t, err := ps.part(param)
			text = append(text, t...)
			return err
		})
		return text, ps.wrap(err, param, param+" must be a string or an array of content parts")
	}
	if s.Null() {
		return nil, nil
	}
	return nil, ps.wrap(s.wrongType(), param, param+" must be a string or an array of content parts")
}

// part reads one content part and returns its text, if it is a text part.
func (ps *parser) part(param string) ([]byte, error) {
	var typ, text []byte
	err := ps.s.Object(func(key []byte) error {
		var err error
		switch string(key) {
		case "type":
			typ, err = ps.s.strBytes()
		case "text":
			if !ps.s.Null() {
				text, err = ps.s.text()
			}
		default:
			err = ps.s.Skip()
		}
		return ps.wrap(err, param, param+" parts must have string type and text")
	})
	if err != nil || !isTextPart(typ) {
		return nil, err
	}
	return text, nil
}

// isTextPart reports a content part whose text is prompt text: chat's
// "text", and the Responses API's "input_text" and "output_text".
func isTextPart(typ []byte) bool {
	switch string(typ) {
	case "text", "input_text", "output_text":
		return true
	}
	return false
}

// prompt reads a completions prompt or an embeddings input: a string,
// an array of strings, an array of token ids, or an array of token id
// arrays. Batches are routed on their first prompt; the others are only
// validated.
func (ps *parser) prompt() error {
	s := &ps.s
	param := ps.ep.PromptParam()
	var err error
	switch s.peek() {
	case '"':
		var b []byte
		b, err = s.text()
		ps.text = b
		if err == nil && len(b) == 0 {
			return badParam(param, param+" must not be empty")
		}
	case '[':
		err = ps.promptArray()
	default:
		err = s.wrongType()
	}
	if err == nil {
		return nil
	}
	return ps.wrap(err, param, param+" must be a string, an array of strings, an array of token ids or an array of token id arrays")
}

// promptArray reads the array forms of a completions prompt, whose kind is
// set by the first element.
func (ps *parser) promptArray() error {
	s := &ps.s
	start := s.i
	s.i++ // '['
	first := s.peek()
	s.i = start
	switch {
	case first == ']':
		return badParam(ps.ep.PromptParam(), ps.ep.PromptParam()+" must not be empty")
	case first == '-' || '0' <= first && first <= '9':
		var err error
		ps.r.Tokens, err = ps.tokens()
		return err
	case first == '"':
		return s.Array(ps.promptString)
	case first == '[':
		return s.Array(ps.promptTokens)
	}
	return s.wrongType()
}

// promptString reads element i of an array of strings.
func (ps *parser) promptString(i int) error {
	b, err := ps.s.text()
	if err == nil && i == 0 {
		if len(b) == 0 {
			return badParam(ps.ep.PromptParam(), ps.ep.PromptParam()+" must not be empty")
		}
		ps.text = b
	}
	return err
}

// promptTokens reads element i of an array of token id arrays; the first
// must not be empty.
func (ps *parser) promptTokens(i int) error {
	if i > 0 {
		_, err := ps.s.countTokenArray(ps.o.MaxPromptTokens)
		return err
	}
	tokens, err := ps.tokens()
	ps.r.Tokens = tokens
	if err == nil && len(tokens) == 0 {
		return badParam(ps.ep.PromptParam(), ps.ep.PromptParam()+" must not be empty")
	}
	return err
}

// responsesInput reads a Responses API input: a string, or an array of
// items serialised as chat messages are (an item with a role and a
// content; items of other types, such as tool calls, are validated but
// not routed on).
func (ps *parser) responsesInput() error {
	s := &ps.s
	const msg = "input must be a string or an array of input items"
	switch s.peek() {
	case '"':
		b, err := s.text()
		if err == nil && len(b) == 0 {
			return badParam("input", "input must not be empty")
		}
		ps.text = append(append(append(ps.text[:0], "user\n"...), b...), '\n')
		return ps.wrap(err, "input", msg)
	case '[':
		ps.text = ps.text[:0]
		err := s.Array(func(i int) error { return ps.inputItem(i) })
		return ps.wrap(err, "input", msg)
	}
	return ps.wrap(s.wrongType(), "input", msg)
}

// inputItem reads input[i] of a Responses request: like a chat message,
// but an item without a role (a tool call or its output) adds nothing.
func (ps *parser) inputItem(i int) error {
	role, content, err := ps.roleContent("input[" + strconv.Itoa(i) + "]")
	if err == nil && len(role) > 0 {
		ps.text = append(append(append(append(ps.text, role...), '\n'), content...), '\n')
	}
	return err
}
