package tokenize

import "encoding/json"

// affixes are the ids a post-processor puts around one encoded sequence
// when special tokens are requested.
type affixes struct {
	prefix, suffix []uint32
}

// postJSON is the union of the post-processor objects this package reads.
type postJSON struct {
	Type       string            `json:"type"`
	Processors []json.RawMessage `json:"processors"`
	Single     []struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
		Sequence *struct {
			ID string `json:"id"`
		} `json:"Sequence"`
	} `json:"single"`
	SpecialTokens map[string]struct {
		IDs []int64 `json:"ids"`
	} `json:"special_tokens"`
	Cls []json.RawMessage `json:"cls"`
	Sep []json.RawMessage `json:"sep"`
}

// parsePost reads the post-processor at key. ByteLevel only adjusts
// offsets, so it contributes nothing here.
func parsePost(raw json.RawMessage, key string) (affixes, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return affixes{}, nil
	}
	var p postJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return affixes{}, invalid(key, "%v", err)
	}
	switch p.Type {
	case "ByteLevel":
		return affixes{}, nil
	case "Sequence":
		var out affixes
		for i, r := range p.Processors {
			a, err := parsePost(r, key+".processors["+itoa(i)+"]")
			if err != nil {
				return affixes{}, err
			}
			out.prefix = append(out.prefix, a.prefix...)
			out.suffix = append(a.suffix, out.suffix...)
		}
		return out, nil
	case "TemplateProcessing":
		return parseTemplate(p, key)
	case "BertProcessing", "RobertaProcessing":
		cls, err1 := pairID(p.Cls)
		sep, err2 := pairID(p.Sep)
		if err1 != nil || err2 != nil {
			return affixes{}, invalid(key, "cls and sep must be [token, id] pairs")
		}
		return affixes{prefix: []uint32{cls}, suffix: []uint32{sep}}, nil
	}
	return affixes{}, unsupported(key+".type", "post-processor "+quote(p.Type))
}

// parseTemplate reads the single-sequence template: special tokens before
// and after the one sequence $A.
func parseTemplate(p postJSON, key string) (affixes, error) {
	var out affixes
	seen := false
	for i, item := range p.Single {
		switch {
		case item.Sequence != nil:
			seen = true
		case item.SpecialToken != nil:
			st, ok := p.SpecialTokens[item.SpecialToken.ID]
			if !ok {
				return affixes{}, invalid(key+".single["+itoa(i)+"]", "special token %q is not in special_tokens", item.SpecialToken.ID)
			}
			for _, id := range st.IDs {
				if id < 0 || id >= maxID {
					return affixes{}, invalid(key+".special_tokens", "id %d out of range", id)
				}
				if seen {
					out.suffix = append(out.suffix, uint32(id))
				} else {
					out.prefix = append(out.prefix, uint32(id))
				}
			}
		}
	}
	return out, nil
}

func pairID(pair []json.RawMessage) (uint32, error) {
	var id int64
	if len(pair) != 2 {
		return 0, ErrInvalid
	}
	if err := json.Unmarshal(pair[1], &id); err != nil || id < 0 || id >= maxID {
		return 0, ErrInvalid
	}
	return uint32(id), nil
}
