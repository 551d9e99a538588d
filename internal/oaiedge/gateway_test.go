package oaiedge

import (
	"slices"
	"strings"
	"testing"
)

func TestParseGateway(t *testing.T) {
	tests := []struct {
		name   string
		ep     Endpoint
		body   string
		tokens []uint32
		lora   string
		salt   string
	}{
		{name: "text prompt", ep: Completions, body: `{"model":"m","prompt":"hello"}`},
		{name: "token prompt", ep: Completions, body: `{"model":"m","prompt":[1,2,3]}`, tokens: []uint32{1, 2, 3}},
		{name: "batch of token prompts routes on the first", ep: Completions, body: `{"model":"m","prompt":[[4,5],[6]]}`, tokens: []uint32{4, 5}},
		{name: "batch of strings", ep: Completions, body: `{"model":"m","prompt":["a","b"]}`},
		{name: "null after the first string", ep: Completions, body: `{"model":"m","prompt":["a",null]}`},
		{name: "extension wins", ep: Completions, body: `{"model":"m","prompt":[1],"kvrouter":{"token_ids":[9,8],"lora":"l"}}`, tokens: []uint32{9, 8}, lora: "l"},
		{name: "prompt beside the extension is only required", ep: Completions, body: `{"model":"m","prompt":5,"kvrouter":{"token_ids":[9]}}`, tokens: []uint32{9}},
		{name: "chat with token ids", ep: Chat, body: `{"model":"m","messages":[{"role":"user","content":"x"}],"kvrouter":{"token_ids":[7]},"cache_salt":"s"}`, tokens: []uint32{7}, salt: "s"},
		{name: "chat text", ep: Chat, body: `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"other":{"a":[1]}}`},
		{name: "messages of anything", ep: Chat, body: `{"model":"m","messages":[1,"x",null]}`},
		{name: "null extension", ep: Chat, body: `{"model":"m","messages":[{}],"kvrouter":null}`},
		{name: "a later null extension drops the earlier", ep: Completions, body: `{"model":"m","prompt":[1],"kvrouter":{"token_ids":[2],"lora":"l"},"kvrouter":null}`, tokens: []uint32{1}},
		{name: "null token ids", ep: Completions, body: `{"model":"m","prompt":[1],"kvrouter":{"token_ids":null}}`, tokens: []uint32{1}},
		{name: "keys match ignoring case", ep: Completions, body: `{"MODEL":"m","Prompt":[3],"KVRouter":{"LoRA":"l"},"Cache_Salt":"s"}`, tokens: []uint32{3}, lora: "l", salt: "s"},
		{name: "exact key preferred", ep: Completions, body: `{"model":"m","Prompt":[3]}`, tokens: []uint32{3}},
		{name: "long s folds to s", ep: Chat, body: `{"model":"m","me\u017fsages":[{}]}`},
		{name: "unchecked fields", ep: Completions, body: `{"model":"m","prompt":"x","stream":"yes","max_tokens":-1,"stream_options":5}`},
		{name: "text not limited", ep: Completions, body: `{"model":"m","prompt":"` + strings.Repeat("x", 1000) + `"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.body), tc.ep, Options{Rules: GatewayRules, MaxPromptTokens: 100})
			if err != nil {
				t.Fatal(err)
			}
			if r.Model != "m" || !slices.Equal(r.Tokens, tc.tokens) || r.LoRA != tc.lora || r.CacheSalt != tc.salt || r.Text != "" {
				t.Fatalf("parsed %+v", r)
			}
		})
	}
}

// TestGatewayRefusals checks the kind and param of each GatewayRules
// refusal, in encoding/json's order where a body has several faults.
func TestGatewayRefusals(t *testing.T) {
	tests := []struct {
		name  string
		ep    Endpoint
		body  string
		kind  error
		param string
	}{
		{name: "not json", ep: Completions, body: `{"model":`, kind: ErrMalformed},
		{name: "not an object", ep: Completions, body: `[1,2]`, kind: ErrInvalid},
		{name: "not an object and malformed", ep: Completions, body: `[1,`, kind: ErrMalformed},
		{name: "null body", ep: Completions, body: `null`, kind: ErrInvalid, param: "model"},
		{name: "missing model", ep: Completions, body: `{"prompt":"x"}`, kind: ErrInvalid, param: "model"},
		{name: "model not a string", ep: Completions, body: `{"model":5,"prompt":"x"}`, kind: ErrInvalid, param: "model"},
		{name: "malformed beats a type error", ep: Completions, body: `{"model":5,"prompt":"x"} x`, kind: ErrMalformed},
		{name: "first type error wins", ep: Completions, body: `{"prompt":[-1],"cache_salt":1,"model":5}`, kind: ErrInvalid, param: "cache_salt"},
		{name: "missing model beats the prompt", ep: Completions, body: `{"prompt":[-1]}`, kind: ErrInvalid, param: "model"},
		{name: "kvrouter not an object", ep: Completions, body: `{"model":"m","prompt":"x","kvrouter":"x"}`, kind: ErrInvalid, param: "kvrouter"},
		{name: "lora not a string", ep: Completions, body: `{"model":"m","prompt":"x","kvrouter":{"lora":[]}}`, kind: ErrInvalid, param: "kvrouter.lora"},
		{name: "missing prompt", ep: Completions, body: `{"model":"m"}`, kind: ErrInvalid, param: "prompt"},
		{name: "null prompt", ep: Completions, body: `{"model":"m","prompt":null}`, kind: ErrInvalid, param: "prompt"},
		{name: "empty prompt", ep: Completions, body: `{"model":"m","prompt":""}`, kind: ErrInvalid, param: "prompt"},
		{name: "negative token", ep: Completions, body: `{"model":"m","prompt":[1,-2]}`, kind: ErrInvalid, param: "prompt"},
		{name: "fraction", ep: Completions, body: `{"model":"m","prompt":[1.5]}`, kind: ErrInvalid, param: "prompt"},
		{name: "exponent", ep: Completions, body: `{"model":"m","prompt":[1e3]}`, kind: ErrInvalid, param: "prompt"},
		{name: "token over 2^32", ep: Completions, body: `{"model":"m","prompt":[4294967296]}`, kind: ErrInvalid, param: "prompt"},
		{name: "string among ids", ep: Completions, body: `{"model":"m","prompt":[1,"1"]}`, kind: ErrInvalid, param: "prompt"},
		{name: "prompt over the limit", ep: Completions, body: `{"model":"m","prompt":[1,2,3,4,5]}`, kind: ErrPromptTooLong, param: "prompt"},
		{name: "batch member over the limit after an empty first", ep: Completions, body: `{"model":"m","prompt":[[],[1,2,3,4,5]]}`, kind: ErrPromptTooLong, param: "prompt"},
		{name: "empty first of a batch", ep: Completions, body: `{"model":"m","prompt":[[],[1]]}`, kind: ErrInvalid, param: "prompt"},
		{name: "bad token_ids", ep: Chat, body: `{"model":"m","messages":[{}],"kvrouter":{"token_ids":[4294967296]}}`, kind: ErrInvalid, param: "kvrouter.token_ids"},
		{name: "empty token_ids", ep: Chat, body: `{"model":"m","messages":[{}],"kvrouter":{"token_ids":[]}}`, kind: ErrInvalid, param: "kvrouter.token_ids"},
		{name: "token_ids over the limit", ep: Completions, body: `{"model":"m","prompt":"x","kvrouter":{"token_ids":[1,2,3,4,5]}}`, kind: ErrPromptTooLong, param: "kvrouter.token_ids"},
		{name: "token_ids beat a missing prompt", ep: Completions, body: `{"model":"m","kvrouter":{"token_ids":"x"}}`, kind: ErrInvalid, param: "kvrouter.token_ids"},
		{name: "prompt required beside token_ids", ep: Completions, body: `{"model":"m","kvrouter":{"token_ids":[1]}}`, kind: ErrInvalid, param: "prompt"},
		{name: "messages checked beside token_ids", ep: Chat, body: `{"model":"m","messages":[],"kvrouter":{"token_ids":[1]}}`, kind: ErrInvalid, param: "messages"},
		{name: "empty messages", ep: Chat, body: `{"model":"m","messages":[]}`, kind: ErrInvalid, param: "messages"},
		{name: "messages not an array", ep: Chat, body: `{"model":"m","messages":{}}`, kind: ErrInvalid, param: "messages"},
		{name: "missing messages", ep: Chat, body: `{"model":"m","prompt":"x"}`, kind: ErrInvalid, param: "messages"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.body), tc.ep, Options{Rules: GatewayRules, MaxPromptTokens: 4})
			kind, param := refusal(t, err)
			if kind != tc.kind || param != tc.param {
				t.Fatalf("%v: kind %v param %q, want %v %q", err, kind, param, tc.kind, tc.param)
			}
		})
	}
}

// TestRulesDiffer pins the bodies on which the two edges answer
// differently, each with what NodeRules and GatewayRules say: "" for
// accepted, else the refused parameter ("-" for none).
func TestRulesDiffer(t *testing.T) {
	tests := []struct {
		name          string
		ep            Endpoint
		body          string
		node, gateway string
	}{
		{name: "stream type", ep: Completions, body: `{"model":"m","prompt":"x","stream":1}`, node: "stream"},
		{name: "max_tokens range", ep: Completions, body: `{"model":"m","prompt":"x","max_tokens":-1}`, node: "max_tokens"},
		{name: "message shape", ep: Chat, body: `{"model":"m","messages":[1]}`, node: "messages[0]"},
		{name: "text over the limit", ep: Completions, body: `{"model":"m","prompt":"` + strings.Repeat("x", 17) + `"}`, node: "prompt"},
		{name: "key case", ep: Completions, body: `{"Model":"m","prompt":"x"}`, node: "model"},
		{name: "prompt beside token_ids", ep: Completions, body: `{"model":"m","prompt":"","kvrouter":{"token_ids":[1]}}`, node: "prompt"},
		{name: "null among strings", ep: Completions, body: `{"model":"m","prompt":["a",null]}`, node: "prompt"},
		{name: "order of faults", ep: Completions, body: `{"prompt":[-1]}`, node: "prompt", gateway: "model"},
		{name: "null body", ep: Completions, body: `null`, node: "-", gateway: "model"},
		{name: "empty first beside a long member", ep: Completions, body: `{"model":"m","prompt":[[],[1,2,3,4,5]]}`, node: "prompt", gateway: "prompt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				rules Rules
				want  string
			}{{NodeRules, tc.node}, {GatewayRules, tc.gateway}} {
				_, err := Parse([]byte(tc.body), tc.ep, Options{Rules: c.rules, MaxPromptTokens: 4})
				got := ""
				if err != nil {
					_, got = refusal(t, err)
					if got == "" {
						got = "-"
					}
				}
				if got != c.want {
					t.Fatalf("rules %d: %q (%v), want %q", c.rules, got, err, c.want)
				}
			}
		})
	}
}
