package frontend

import (
	"encoding/json"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/tokenize"
)

// Tokenization outcomes, the values of kvrouter_frontend_tokenized_total's
// outcome label.
const (
	tokenizedExact       = "exact"       // the model's tokenizer gave the ids
	tokenizedClient      = "client"      // the client sent token ids
	tokenizedApproximate = "approximate" // no tokenizer: text blocks
	tokenizedFailed      = "failed"      // the tokenizer refused (a template error): text blocks
)

// exactTokens gives a text prompt the token ids the engine will compute,
// when the model has a tokenizer (Config.Tokenizers): a completion's
// prompt is encoded with the special tokens the engine adds (vLLM's
// add_special_tokens, true by default); a chat request is rendered by the
// model's chat template (with tools, add_generation_prompt, true by
// default, and chat_template_kwargs) and encoded without them, as vLLM
// does. The request still goes to the engine as the client sent it; only
// routing uses the ids. A model without a tokenizer, or whose template
// refuses the conversation, is routed by its text (routing.TextHashes),
// as before; the first such request of each model is logged.
func (x *exchange) exactTokens() {
	p := x.p
	if p.Tokens != nil {
		x.s.tokenized(tokenizedClient)
		return
	}
	tok := x.s.cfg.Tokenizers[p.Model]
	if tok == nil {
		if _, seen := x.s.approximated.LoadOrStore(p.Model, true); !seen && len(x.s.cfg.Tokenizers) > 0 {
			x.s.log.Warn("model has no tokenizer configured; its text prompts are routed by text blocks, which do not line up with the engine's token blocks", "model", p.Model)
		}
		x.s.tokenized(tokenizedApproximate)
		return
	}
	ids, err := encodeExact(tok, x.ep, x.body.data, p.Text)
	if err != nil {
		x.s.log.Debug("tokenizer refused the prompt; routing by text blocks", "model", p.Model, "err", err)
		x.s.tokenized(tokenizedFailed)
		return
	}
	p.Tokens, p.Text = ids, ""
	x.s.tokenized(tokenizedExact)
}

// chatFields are the members of a chat request that its rendering reads.
type chatFields struct {
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
	AddSpecialTokens    *bool           `json:"add_special_tokens"`
	ChatTemplateKwargs  map[string]any  `json:"chat_template_kwargs"`
}

func encodeExact(tok *tokenize.Tokenizer, ep oaiedge.Endpoint, body []byte, text string) ([]uint32, error) {
	if ep != oaiedge.Chat {
		var f struct {
			AddSpecialTokens *bool `json:"add_special_tokens"`
		}
		_ = json.Unmarshal(body, &f) // the body was parsed already; a stray field type only keeps the default
		return tok.Encode(text, f.AddSpecialTokens == nil || *f.AddSpecialTokens, make([]uint32, 0, len(text)/3+8)), nil
	}
	var f chatFields
	if err := json.Unmarshal(body, &f); err != nil {
		return nil, err
	}
	req := tokenize.ChatRequest{Messages: f.Messages, AddGenerationPrompt: f.AddGenerationPrompt == nil || *f.AddGenerationPrompt,
		Kwargs: f.ChatTemplateKwargs}
	if len(f.Tools) > 0 && string(f.Tools) != "null" {
		req.Tools = f.Tools
	}
	rendered, err := tok.ApplyChatTemplate(req)
	if err != nil {
		return nil, err
	}
	return tok.Encode(rendered, f.AddSpecialTokens != nil && *f.AddSpecialTokens, make([]uint32, 0, len(rendered)/3+8)), nil
}

func (s *Server) tokenized(outcome string) {
	if s.metrics != nil {
		s.metrics.Tokenized.WithLabelValues(outcome).Inc()
	}
}
