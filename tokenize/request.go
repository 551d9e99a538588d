package tokenize

import "encoding/json"

// openAIChat holds the members of an OpenAI chat request that its
// rendering reads.
type openAIChat struct {
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
	AddSpecialTokens    *bool           `json:"add_special_tokens"`
	ChatTemplateKwargs  map[string]any  `json:"chat_template_kwargs"`
}

// EncodeRequest returns the token ids an engine computes for an
// OpenAI-compatible request body, appended to dst. A chat request
// (chat true) is rendered by the model's chat template with its tools,
// add_generation_prompt (true unless the body says false) and
// chat_template_kwargs, then encoded without special tokens unless the
// body's add_special_tokens is true; a completion's prompt text is encoded
// with special tokens unless add_special_tokens is false. These are vLLM's
// rules. The body must already be valid JSON; prompt is the completion's
// text prompt (unused for chat).
func (t *Tokenizer) EncodeRequest(body []byte, chat bool, prompt string, dst []uint32) ([]uint32, error) {
	if !chat {
		var f struct {
			AddSpecialTokens *bool `json:"add_special_tokens"`
		}
		// A mistyped field leaves the default, as the engine would refuse
		// the request anyway.
		_ = json.Unmarshal(body, &f)
		return t.Encode(prompt, f.AddSpecialTokens == nil || *f.AddSpecialTokens, dst), nil
	}
	var f openAIChat
	if err := json.Unmarshal(body, &f); err != nil {
		return dst, err
	}
	req := ChatRequest{Messages: f.Messages, AddGenerationPrompt: f.AddGenerationPrompt == nil || *f.AddGenerationPrompt,
		Kwargs: f.ChatTemplateKwargs}
	if len(f.Tools) > 0 && string(f.Tools) != "null" {
		req.Tools = f.Tools
	}
	rendered, err := t.ApplyChatTemplate(req)
	if err != nil {
		return dst, err
	}
	return t.Encode(rendered, f.AddSpecialTokens != nil && *f.AddSpecialTokens, dst), nil
}
