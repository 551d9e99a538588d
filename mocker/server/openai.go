package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/kvrouter/kvrouter/routing"
)

// ErrRequest is wrapped by every error about a malformed client request;
// the HTTP edge maps it to 400.
var ErrRequest = errors.New("bad request")

// extension is the documented "kvrouter" request field: the prompt's token
// ids, so that the engine caches exactly the blocks the router hashed, and
// the LoRA adapter that seeds the block hashes.
type extension struct {
	TokenIDs tokenList `json:"token_ids"`
	LoRA     string    `json:"lora"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// common are the fields shared by chat and completion requests.
type common struct {
	Model         string         `json:"model"`
	MaxTokens     *int64         `json:"max_tokens"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	N             *int64         `json:"n"`
	CacheSalt     string         `json:"cache_salt"`
	KVRouter      *extension     `json:"kvrouter"`
}

type chatRequest struct {
	common
	Messages            []chatMessage `json:"messages"`
	MaxCompletionTokens *int64        `json:"max_completion_tokens"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type completionRequest struct {
	common
	Prompt json.RawMessage `json:"prompt"`
}

// generation is a request normalised for the engine.
type generation struct {
	chat         bool
	model        string
	tokens       []uint32
	seed         uint64
	lora, salt   string
	maxTokens    int
	limited      bool // the client named the output length
	stream       bool
	includeUsage bool
}

// limits are the output-length settings a request is normalised against.
type limits struct{ def, max int }

// parseChat decodes a chat completion request body.
func parseChat(body []byte, lim limits) (*generation, error) {
	var req chatRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	if len(req.Messages) == 0 {
		return nil, fmt.Errorf("%w: messages must not be empty", ErrRequest)
	}
	maxTok := req.MaxCompletionTokens
	if maxTok == nil {
		maxTok = req.MaxTokens
	}
	g, err := req.common.generation(true, maxTok, lim)
	if err != nil || g.tokens != nil {
		return g, err
	}
	text, err := chatText(req.Messages)
	if err != nil {
		return nil, err
	}
	g.tokens = TextTokens(text)
	return g, nil
}

// parseCompletion decodes a completion request body.
func parseCompletion(body []byte, lim limits) (*generation, error) {
	var req completionRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	g, err := req.common.generation(false, req.MaxTokens, lim)
	if err != nil || g.tokens != nil {
		return g, err
	}
	g.tokens, err = promptTokens(req.Prompt)
	return g, err
}

func decodeJSON(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: invalid JSON body: %v", ErrRequest, err)
	}
	return nil
}

// generation checks the shared fields; tokens are set when the kvrouter
// extension carries them.
func (c *common) generation(chat bool, maxTok *int64, lim limits) (*generation, error) {
	if c.N != nil && *c.N != 1 {
		return nil, fmt.Errorf("%w: n must be 1", ErrRequest)
	}
	g := &generation{chat: chat, model: c.Model, stream: c.Stream, maxTokens: lim.def,
		includeUsage: c.StreamOptions != nil && c.StreamOptions.IncludeUsage}
	if maxTok != nil {
		if *maxTok < 1 {
			return nil, fmt.Errorf("%w: max_tokens must be at least 1, got %d", ErrRequest, *maxTok)
		}
		g.maxTokens, g.limited = int(min(*maxTok, int64(lim.max))), true
	}
	var lora string
	if c.KVRouter != nil {
		lora = c.KVRouter.LoRA
		if len(c.KVRouter.TokenIDs) > 0 {
			g.tokens = c.KVRouter.TokenIDs
		}
	}
	g.seed = routing.Seed(lora, c.CacheSalt)
	g.lora, g.salt = lora, c.CacheSalt
	return g, nil
}

// promptTokens reads a completion prompt: a string, an array of one
// string, an array of token ids or an array of one token-id array. Batched
// prompts are refused: one request is one engine sequence here.
func promptTokens(raw json.RawMessage) ([]uint32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == 'n' {
		return nil, fmt.Errorf("%w: prompt is required", ErrRequest)
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("%w: prompt: %v", ErrRequest, err)
		}
		return TextTokens(s), nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("%w: prompt must be a string or an array: %v", ErrRequest, err)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: prompt must not be empty", ErrRequest)
	}
	first := bytes.TrimSpace(items[0])
	if len(first) > 0 && (first[0] == '"' || first[0] == '[') {
		if len(items) != 1 {
			return nil, fmt.Errorf("%w: batched prompts are not supported", ErrRequest)
		}
		return promptTokens(first)
	}
	var ids tokenList
	if err := ids.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("prompt: %w", err)
	}
	return ids, nil
}

// chatText serialises messages with role markers, the text the pseudo
// tokens are made of when no token ids are given.
func chatText(msgs []chatMessage) (string, error) {
	var b strings.Builder
	for i, m := range msgs {
		if m.Role == "" {
			return "", fmt.Errorf("%w: messages[%d].role is required", ErrRequest, i)
		}
		text, err := messageText(m.Content)
		if err != nil {
			return "", fmt.Errorf("%w: messages[%d].content: %v", ErrRequest, i, err)
		}
		b.WriteString("<|" + m.Role + "|>\n" + text + "\n")
	}
	return b.String(), nil
}

// messageText reads a message content: a string, null, or an array of
// parts whose text parts are concatenated.
func messageText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// TextTokens turns text into pseudo token ids, four UTF-8 bytes per token
// read as a little-endian u32 (the tail zero-padded), the convention
// shared with routers that send text: equal text prefixes give equal
// token prefixes, so the simulated prefix cache behaves like a real one.
func TextTokens(s string) []uint32 {
	out := make([]uint32, 0, (len(s)+3)/4)
	for i := 0; i < len(s); i += 4 {
		var b [4]byte
		copy(b[:], s[i:])
		out = append(out, binary.LittleEndian.Uint32(b[:]))
	}
	return out
}

// tokenList is a JSON array of token ids. It decodes itself with a direct
// scan instead of encoding/json's reflective path, which costs several
// times more for the 100k-token prompts the simulator replays; every id is
// checked to be an integer that fits a u32.
type tokenList []uint32

// UnmarshalJSON reads an array of non-negative integers (null reads as
// empty).
func (l *tokenList) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, []byte("null")) {
		*l = nil
		return nil
	}
	if len(data) < 2 || data[0] != '[' || data[len(data)-1] != ']' {
		return fmt.Errorf("%w: token ids must be an array", ErrRequest)
	}
	out := make([]uint32, 0, len(data)/4)
	body := bytes.TrimSpace(data[1 : len(data)-1])
	for len(body) > 0 {
		var item []byte
		item, body, _ = bytes.Cut(body, []byte{','})
		v, err := parseTokenID(bytes.TrimSpace(item))
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	*l = out
	return nil
}

// parseTokenID parses one decimal id in 0..MaxUint32.
func parseTokenID(b []byte) (uint32, error) {
	if len(b) == 0 || len(b) > 10 {
		return 0, fmt.Errorf("%w: token id %q is not a u32", ErrRequest, b)
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: token id %q is not a u32", ErrRequest, b)
		}
		v = v*10 + uint64(c-'0')
	}
	if v > math.MaxUint32 {
		return 0, fmt.Errorf("%w: token id %s out of range", ErrRequest, b)
	}
	return uint32(v), nil
}
