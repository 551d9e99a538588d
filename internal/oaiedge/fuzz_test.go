package oaiedge

import (
	"encoding/json"
	"errors"
	"testing"
)

// checkNode is the fuzz oracle: the parser never panics,
// refuses every body encoding/json refuses, never calls a body that
// encoding/json accepts malformed, and agrees with it on the model.
func checkNode(t *testing.T, body []byte, ep Endpoint) {
	r, err := Parse(body, ep, Options{MaxPromptTokens: 1 << 16})
	valid := json.Valid(body)
	if !valid && err == nil {
		t.Fatalf("accepted invalid JSON %q", body)
	}
	if valid && errors.Is(err, ErrMalformed) {
		t.Fatalf("refused valid JSON %q as malformed: %v", body, err)
	}
	if err != nil {
		refusal(t, err)
		return
	}
	var ref struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(body, &ref) == nil && ref.Model != r.Model {
		t.Fatalf("model %q, encoding/json %q", r.Model, ref.Model)
	}
}

func fuzzSeeds(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a\u00e9"}]}],"kvrouter":{"token_ids":[1,2]}}`,
		`{"model":"m","prompt":[1,2,3],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","prompt":[[1],[2,3]],"max_tokens":4}`,
		`{"model":"m","prompt":["a","b"],"cache_salt":"s"}`,
		`{"MODEL":"m","prompt":["a",null],"kvrouter":null}`,
		`{"model":"m","prompt":[1, 23456789,0 ,4294967295]}`,
		`{"model":"m","messages":[{}],"kvrouter":{"token_ids":[1]}}`, `[]`, `{"prompt":[-1]}`, `{"model":"m","prompt":["",""]}`,
		`{"model":"m","prompt":-0.5e+3}`, `{"a":[{},[],null,true,false,"\"\\\/\b\f\n\r\t"]}`, `{`, `[`, `"x"`, ``, `null`,
	} {
		f.Add([]byte(s))
	}
}

func FuzzParseChat(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) { checkNode(t, body, Chat) })
}

func FuzzParseCompletions(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) { checkNode(t, body, Completions) })
}

func FuzzParseResponses(f *testing.F) {
	fuzzSeeds(f)
	f.Add([]byte(`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"function_call"}],"instructions":"x"}`))
	f.Fuzz(func(t *testing.T, body []byte) { checkNode(t, body, Responses) })
}

func FuzzParseEmbeddings(f *testing.F) {
	fuzzSeeds(f)
	f.Add([]byte(`{"model":"m","input":[[1,2],[3]],"user":"u"}`))
	f.Fuzz(func(t *testing.T, body []byte) { checkNode(t, body, Embeddings) })
}
