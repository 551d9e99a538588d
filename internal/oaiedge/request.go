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

// DefaultTextBytesPerToken is the usual ratio of English text under BPE
// tokenizers, used when Options.TextBytesPerToken is zero.
const DefaultTextBytesPerToken = 4

// Options are the limits of one Parse.
type Options struct {
	// MaxPromptTokens caps prompts: token id arrays (every one of a batch)
	// and text at TextBytesPerToken.
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
	// Stream and IncludeUsage (stream_options.include_usage).
	Stream, IncludeUsage bool
	// MaxTokens is max_completion_tokens, else max_tokens, else 0.
	MaxTokens int
	// Tokens are the prompt's token ids when the client sent them
	// (kvrouter.token_ids, else a completions prompt of token ids, the
	// first of a batch); nil for text prompts.
	Tokens []uint32
	// Text is the prompt text for text-hash routing when Tokens is nil: a completions prompt (the first of a batch), or
	// for chat each message's role, a newline, its text content (text
	// parts concatenated) and a newline.
	Text string
	// LoRA (kvrouter.lora) and CacheSalt (cache_salt) seed the block
	// hashes.
	LoRA, CacheSalt string

	bytesPerToken int
	scratch       []uint32
	// pooled is the pool's buffer scratch came from (ParsePooled).
	pooled *[]uint32
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
