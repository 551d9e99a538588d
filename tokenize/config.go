package tokenize

import "encoding/json"

// config is the part of tokenizer_config.json this package reads.
type config struct {
	specialTokens map[string]string // bos_token, eos_token, ...: for templates
	templates     map[string]string // chat templates by name; "default" first
	addBOS        *bool
	addEOS        *bool
	class         string
	splitSpecial  bool
}

// specialTokenKeys are the tokenizer_config.json keys a chat template sees
// as variables of the same name.
var specialTokenKeys = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}

type configJSON struct {
	ChatTemplate       json.RawMessage `json:"chat_template"`
	AddBOSToken        *bool           `json:"add_bos_token"`
	AddEOSToken        *bool           `json:"add_eos_token"`
	TokenizerClass     string          `json:"tokenizer_class"`
	SplitSpecialTokens bool            `json:"split_special_tokens"`
}

// parseConfig reads tokenizer_config.json. Special tokens are either
// strings or AddedToken objects whose content is the string.
func parseConfig(data []byte) (config, error) {
	var c configJSON
	if err := json.Unmarshal(data, &c); err != nil {
		return config{}, invalid("", "%v", err)
	}
	var all map[string]json.RawMessage
	_ = json.Unmarshal(data, &all) // cannot fail after the decode above
	cfg := config{
		specialTokens: map[string]string{}, addBOS: c.AddBOSToken, addEOS: c.AddEOSToken,
		class: c.TokenizerClass, splitSpecial: c.SplitSpecialTokens,
	}
	for _, k := range specialTokenKeys {
		if v, ok := tokenString(all[k]); ok {
			cfg.specialTokens[k] = v
		} else if len(all[k]) > 0 && string(all[k]) != "null" {
			return config{}, invalid(k, "neither a string nor an object with a content string")
		}
	}
	t, err := parseTemplates(c.ChatTemplate)
	if err != nil {
		return config{}, err
	}
	cfg.templates = t
	return cfg, nil
}

func tokenString(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Content != nil {
		return *obj.Content, true
	}
	return "", false
}

// parseTemplates reads chat_template: one string, or a list of named
// templates.
func parseTemplates(raw json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return map[string]string{"default": one}, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return nil, invalid("chat_template", "neither a string nor a list of {name, template}: %v", err)
	}
	out := make(map[string]string, len(named))
	for _, n := range named {
		out[n.Name] = n.Template
	}
	return out, nil
}

// llamaAffixes applies what the reference's Llama tokenizer classes do on
// load: they replace the file's post-processor by one that adds the
// beginning-of-sequence token unless add_bos_token is false, and the end
// token when add_eos_token is true.
func (c config) llamaAffixes(t *Tokenizer) (affixes, bool, error) {
	switch c.class {
	case "LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer", "CodeLlamaTokenizerFast":
	default:
		return affixes{}, false, nil
	}
	var a affixes
	if c.addBOS == nil || *c.addBOS {
		id, ok := t.specialID("bos_token")
		if !ok {
			return affixes{}, false, invalid("bos_token", "add_bos_token needs a bos_token in the vocabulary")
		}
		a.prefix = []uint32{id}
	}
	if c.addEOS != nil && *c.addEOS {
		id, ok := t.specialID("eos_token")
		if !ok {
			return affixes{}, false, invalid("eos_token", "add_eos_token needs an eos_token in the vocabulary")
		}
		a.suffix = []uint32{id}
	}
	return a, true, nil
}
