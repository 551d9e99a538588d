package oaiedge

// Endpoint names the two OpenAI endpoints whose bodies Parse reads.
type Endpoint uint8

const (
	// Chat is POST /v1/chat/completions, whose prompt is "messages".
	Chat Endpoint = iota
	// Completions is POST /v1/completions, whose prompt is "prompt".
	Completions
)

// Path is the endpoint's path, on gateways, router nodes and engines
// alike.
func (e Endpoint) Path() string {
	if e == Chat {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

// PromptParam is the name of the endpoint's prompt parameter.
func (e Endpoint) PromptParam() string {
	if e == Chat {
		return "messages"
	}
	return "prompt"
}

// Rules selects what Parse checks beyond well-formed JSON. The router
// node and the DC gateway refuse different sets of bodies today (doc.go
// lists the differences); each keeps its own set so that moving to this
// package changed neither edge's answers.
type Rules uint8

const (
	// NodeRules are the router node's: every field the node reads is
	// type-checked where it stands and the first fault in document order
	// is reported; messages are parsed into Text; text prompts count
	// against the limit at Options.TextBytesPerToken.
	NodeRules Rules = iota
	// GatewayRules are the gateway's, which decoded bodies with
	// encoding/json into a few typed fields: malformed JSON anywhere wins,
	// then the first value of the wrong type among model, cache_salt,
	// kvrouter and kvrouter.lora, then a missing model, then the token id
	// extension, then the prompt. Keys also match ignoring case;
	// stream, stream_options and the token caps are not read; messages
	// need only be a non-empty array; text prompts are not limited; a
	// completions prompt beside kvrouter.token_ids need only be present.
	GatewayRules
)

// DefaultTextBytesPerToken is the usual ratio of English text under BPE
// tokenizers, used when Options.TextBytesPerToken is zero.
const DefaultTextBytesPerToken = 4

// Options are the limits and rules of one Parse.
type Options struct {
	// Rules selects the checks; the zero value is NodeRules.
	Rules Rules
	// MaxPromptTokens caps prompts: token id arrays (every one of a batch)
	// and, under NodeRules, text at TextBytesPerToken.
	MaxPromptTokens int
	// TextBytesPerToken converts a text prompt's length into an estimated
	// token count; zero means DefaultTextBytesPerToken.
	TextBytesPerToken int
}

// Request is what routing needs of a body; the body itself is forwarded
// unchanged, so nothing else is kept.
type Request struct {
	Endpoint Endpoint
	Model    string
	// Stream and IncludeUsage (stream_options.include_usage) are read
	// under NodeRules only.
	Stream, IncludeUsage bool
	// MaxTokens is max_completion_tokens, else max_tokens, else 0; read
	// under NodeRules only.
	MaxTokens int
	// Tokens are the prompt's token ids when the client sent them
	// (kvrouter.token_ids, else a completions prompt of token ids, the
	// first of a batch); nil for text prompts.
	Tokens []uint32
	// Text is the prompt text for text-hash routing when Tokens is nil,
	// under NodeRules: a completions prompt (the first of a batch), or
	// for chat each message's role, a newline, its text content (text
	// parts concatenated) and a newline.
	Text string
	// LoRA (kvrouter.lora) and CacheSalt (cache_salt) seed the block
	// hashes.
	LoRA, CacheSalt string

	bytesPerToken int
	scratch       []uint32
}

// PromptTokens is the prompt length in tokens: exact for token ids,
// estimated at Options.TextBytesPerToken for text.
func (r *Request) PromptTokens() int {
	if r.Tokens != nil {
		return len(r.Tokens)
	}
	bpt := r.bytesPerToken
	if bpt <= 0 {
		bpt = DefaultTextBytesPerToken
	}
	return (len(r.Text) + bpt - 1) / bpt
}

// Scratch is the buffer given to ParseReusing, or the larger one the
// parse grew it into; Tokens may alias it. The caller recycles it once it
// no longer uses Tokens. It is nil after Parse.
func (r *Request) Scratch() []uint32 { return r.scratch }
