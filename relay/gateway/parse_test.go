package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name       string
		ep         endpoint
		body       string
		wantTokens []uint32
		wantLoRA   string
		wantSalt   string
	}{
		{name: "text prompt", ep: endpointCompletions, body: `{"model":"m","prompt":"hello"}`},
		{name: "token prompt", ep: endpointCompletions, body: `{"model":"m","prompt":[1,2,3]}`, wantTokens: []uint32{1, 2, 3}},
		{name: "batch of token prompts routes on the first", ep: endpointCompletions, body: `{"model":"m","prompt":[[4,5],[6]]}`, wantTokens: []uint32{4, 5}},
		{name: "batch of strings", ep: endpointCompletions, body: `{"model":"m","prompt":["a","b"]}`},
		{name: "extension wins", ep: endpointCompletions, body: `{"model":"m","prompt":[1],"kvrouter":{"token_ids":[9,8],"lora":"l"}}`, wantTokens: []uint32{9, 8}, wantLoRA: "l"},
		{name: "chat with token ids", ep: endpointChat, body: `{"model":"m","messages":[{"role":"user","content":"x"}],"kvrouter":{"token_ids":[7]},"cache_salt":"s"}`, wantTokens: []uint32{7}, wantSalt: "s"},
		{name: "chat text", ep: endpointChat, body: `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"other":{"a":[1]}}`},
		{name: "null extension", ep: endpointChat, body: `{"model":"m","messages":[{}],"kvrouter":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parseRequest([]byte(tt.body), tt.ep, 100)
			if err != nil {
				t.Fatal(err)
			}
			if r.Model != "m" || !slices.Equal(r.Tokens, tt.wantTokens) || r.LoRA != tt.wantLoRA || r.CacheSalt != tt.wantSalt {
				t.Fatalf("parsed %+v", r)
			}
		})
	}
}

// answer is what a client sees of a parse error: its class and param.
func answer(err error) (kind error, param string) {
	var re *requestError
	if err == nil || !errors.As(err, &re) {
		return err, ""
	}
	return re.kind, re.param
}

// checkSameAsJSON fails unless parseRequest answers body as the
// encoding/json path did: the same class and param on a refusal, the
// same fields otherwise.
func checkSameAsJSON(t interface{ Fatalf(string, ...any) }, body []byte, ep endpoint, limit int) {
	got, gerr := parseRequest(body, ep, limit)
	want, werr := parseRequestJSON(body, ep, limit)
	gk, gp := answer(gerr)
	wk, wp := answer(werr)
	if gk != wk || gp != wp {
		t.Fatalf("%s (ep %d): %v %q (%v), encoding/json %v %q (%v)", body, ep, gk, gp, gerr, wk, wp, werr)
	}
	if gerr == nil && (got.Model != want.Model || !slices.Equal(got.Tokens, want.Tokens) || got.LoRA != want.LoRA || got.CacheSalt != want.CacheSalt) {
		t.Fatalf("%s (ep %d): parsed %+v, encoding/json %+v", body, ep, got, want)
	}
}

// members are the values drawn for each key of a generated body: the
// forms each field takes, right and wrong, under the limit of 8 and over.
var members = map[string][]string{
	"model":      {`"m"`, `""`, `5`, `null`, `"a"`},
	"prompt":     {`"x"`, `""`, `[1,2]`, `[]`, `[[1],[2,3]]`, `[[],[1]]`, `["a",null]`, `[null]`, `["",""]`, `[1,-2]`, `[1.5]`, `[4294967296]`, `5`, `{}`, `null`, `[1,2,3,4,5,6,7,8,9]`, `[[1],[1,2,3,4,5,6,7,8,9]]`, `[[],[1,2,3,4,5,6,7,8,9]]`, `["a",5]`, `[ 1 , 2 ]`},
	"messages":   {`[{}]`, `[]`, `{}`, `null`, `[1]`, `"x"`},
	"kvrouter":   {`{"token_ids":[1]}`, `{"token_ids":[]}`, `{"token_ids":null}`, `{"token_ids":["a"]}`, `{"lora":"l"}`, `{"lora":5}`, `{"LoRA":"l","Token_IDs":[7,8]}`, `null`, `5`, `[]`, `{"token_ids":[1,2,3,4,5,6,7,8,9]}`},
	"cache_salt": {`"s"`, `1`, `null`},
	"stream":     {`true`, `"yes"`},
}

// drawBody draws a body of a few members, keys now and then in another
// case, now and then not an object or cut short.
func drawBody(t *rapid.T) []byte {
	keys := []string{"model", "prompt", "messages", "kvrouter", "cache_salt", "stream"}
	n := rapid.IntRange(0, 6).Draw(t, "members")
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range n {
		key := rapid.SampledFrom(keys).Draw(t, "key")
		if i > 0 {
			b.WriteByte(',')
		}
		name := key
		if rapid.IntRange(0, 5).Draw(t, "case") == 0 {
			name = strings.ToUpper(key)
		}
		b.WriteString(strconv.Quote(name) + ":" + rapid.SampledFrom(members[key]).Draw(t, "value"))
	}
	b.WriteByte('}')
	switch rapid.IntRange(0, 12).Draw(t, "shape") {
	case 0:
		return []byte(rapid.SampledFrom([]string{`null`, `[1]`, `"x"`, `[1,`}).Draw(t, "other"))
	case 1:
		return b.Bytes()[:rapid.IntRange(0, b.Len()-1).Draw(t, "cut")]
	}
	return b.Bytes()
}

// TestParseMatchesEncodingJSON checks that the gateway answers generated
// bodies, most of them faulty, as its encoding/json path did.
func TestParseMatchesEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		body := drawBody(t)
		checkSameAsJSON(t, body, endpointChat, 8)
		checkSameAsJSON(t, body, endpointCompletions, 8)
	})
}

// FuzzParseMatchesEncodingJSON is TestParseMatchesEncodingJSON on
// arbitrary bodies; the parser's own fuzz targets are in oaiedge.
func FuzzParseMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{`{"model":"m","prompt":[1,2]}`, `{"model":"m","messages":[{}],"kvrouter":{"token_ids":[1]}}`,
		`{"model":"m","prompt":[[1],[2]]}`, `[]`, `{"prompt":[-1]}`, `{"model":"m","prompt":["",""]}`,
		`{"MODEL":"m","Prompt":["a",null],"kvrouter":null}`, `null`, `{"model":5} x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkSameAsJSON(t, body, endpointChat, 8)
		checkSameAsJSON(t, body, endpointCompletions, 8)
	})
}

// completionsBody is a completions body of n token ids drawn from a 50k
// vocabulary, as clients serialise pre-tokenized prompts.
func completionsBody(n int) []byte {
	rng := rand.New(rand.NewPCG(7, 11))
	b := []byte(`{"model":"m","max_tokens":16,"stream":true,"prompt":[`)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(rng.IntN(50000)), 10)
	}
	return append(b, "]}"...)
}

// BenchmarkParse compares the gateway's parse of a pre-tokenized
// completions body, before (the encoding/json path) and after (oaiedge),
// at 4,096 and 12,288 ids.
func BenchmarkParse(b *testing.B) {
	for _, n := range []int{4096, 12288} {
		body := completionsBody(n)
		for _, p := range []struct {
			name  string
			parse func([]byte, endpoint, int) (request, error)
		}{{"encoding-json", parseRequestJSON}, {"oaiedge", parseRequest}} {
			b.Run(strconv.Itoa(n)+"/"+p.name, func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					if r, err := p.parse(body, endpointCompletions, math.MaxInt32); err != nil || len(r.Tokens) != n {
						b.Fatalf("%d tokens, err %v", len(r.Tokens), err)
					}
				}
			})
		}
	}
}

// The encoding/json path, as the gateway parsed before oaiedge.

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

// parseRequestJSON is the gateway's parse before oaiedge, kept as the
// reference its answers are compared with and as the "before" of
// BenchmarkParse. It reads the fields the decision needs with
// encoding/json and checks the ones every router node would refuse.
func parseRequestJSON(body []byte, ep endpoint, limit int) (request, error) {
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

// errNotTokens marks an array that is not all token ids.
var errNotTokens = errors.New("not an array of token ids")

// parseTokens reads a JSON array of token ids (integers in [0, 2^32))
// from raw, which the caller has already validated as JSON: so numbers
// are well formed and only their kind and range need checking. It is the
// hot path of pre-tokenized requests and does one pass with no
// allocation beyond the result; encoding/json costs several times more.
func parseTokens(raw []byte, limit int) ([]uint32, error) {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, errNotTokens
	}
	out := make([]uint32, 0, min(limit, len(raw)/2+1))
	i = skipWS(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return out, nil
	}
	for i < len(raw) {
		v, next, ok := token(raw, i)
		if !ok {
			return nil, errNotTokens
		}
		if len(out) == limit {
			return nil, ErrPromptTooLong
		}
		out = append(out, v)
		i = skipWS(raw, next)
		if i < len(raw) && raw[i] == ']' {
			return out, nil
		}
		if i >= len(raw) || raw[i] != ',' {
			return nil, errNotTokens
		}
		i = skipWS(raw, i+1)
	}
	return nil, errNotTokens
}

// token reads one non-negative integer below 2^32 at raw[i:].
func token(raw []byte, i int) (uint32, int, bool) {
	var v uint64
	start := i
	for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
		v = v*10 + uint64(raw[i]-'0')
		if v > math.MaxUint32 {
			return 0, i, false
		}
		i++
	}
	if i == start || i < len(raw) && (raw[i] == '.' || raw[i] == 'e' || raw[i] == 'E') {
		return 0, i, false
	}
	return uint32(v), i, true
}

// skipWS skips JSON whitespace from i.
func skipWS(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// TestParsePooledMatchesParse checks that recycled token buffers give the
// same requests as fresh parsing, including after a refusal wrote into
// the buffer.
func TestParsePooledMatchesParse(t *testing.T) {
	bodies := []string{
		tokensBody("m", 300, false),
		`{"model":"m","prompt":[1,2,"x"]}`,
		tokensBody("m", 20, false),
		`{"model":"m","prompt":"text"}`,
		tokensBody("m", 4096, false),
	}
	for round := range 3 {
		for i, b := range bodies {
			want, wantErr := parseRequest([]byte(b), endpointCompletions, 10_000)
			got, buf, err := parseRequestPooled([]byte(b), endpointCompletions, 10_000)
			same := got.Model == want.Model && got.LoRA == want.LoRA && got.CacheSalt == want.CacheSalt && slices.Equal(got.Tokens, want.Tokens)
			if (err == nil) != (wantErr == nil) || !same {
				t.Fatalf("round %d body %d: pooled %+v, %v; fresh %+v, %v", round, i, got, err, want, wantErr)
			}
			releaseTokens(buf)
		}
	}
}
