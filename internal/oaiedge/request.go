package oaiedge

// Endpoint names the OpenAI endpoints whose bodies Parse reads and the
// edges route: the two completion endpoints and the pass-through ones.
type Endpoint uint8

const (
	// Chat is POST /v1/chat/completions, whose prompt is "messages".
	Chat Endpoint = iota
	// Completions is POST /v1/completions, whose prompt is "prompt".
	Completions
	// Embeddings is POST /v1/embeddings, whose "input" has the shapes of
	// a completions prompt; it is routed by the prefix of its first input.
	Embeddings
	// Responses is POST /v1/responses, whose "input" is a string or an
	// array of items, routed like chat messages.
	Responses
	// Tokenize and Detokenize are vLLM's POST /tokenize and /detokenize:
	// routed by model alone, to any engine serving it.
	Tokenize
	Detokenize
	// NumEndpoints counts the endpoints, for tables indexed by Endpoint.
	NumEndpoints
)

// Endpoints lists every endpoint, in Endpoint order.
var Endpoints = [NumEndpoints]Endpoint{Chat, Completions, Embeddings, Responses, Tokenize, Detokenize}

// endpointInfo describes one endpoint: its path, its prompt parameter
// ("" when it has none routing reads) and whether a prompt is required.
var endpointInfo = [NumEndpoints]struct {
	path, prompt string
}{
	Chat:        {"/v1/chat/completions", "messages"},
	Completions: {"/v1/completions", "prompt"},
	Embeddings:  {"/v1/embeddings", "input"},
	Responses:   {"/v1/responses", "input"},
	Tokenize:    {"/tokenize", ""},
	Detokenize:  {"/detokenize", ""},
}

// Path is the endpoint's path, on gateways, router nodes and engines
// alike.
func (e Endpoint) Path() string {
	if e >= NumEndpoints {
		return ""
	}
	return endpointInfo[e].path
}

// PromptParam is the name of the endpoint's prompt parameter, "" for the
// endpoints routed by model alone.
func (e Endpoint) PromptParam() string {
	if e >= NumEndpoints {
		return ""
	}
	return endpointInfo[e].prompt
}

// Tokenizable reports whether a text prompt of the endpoint is encoded
// by the engine as tokenize.EncodeRequest does (chat: rendered by the
// chat template; otherwise: the text itself), so that an edge with the
// model's tokenizer can route it by the engine's own token blocks.
// Responses are rendered by the engine from items this package only
// serialises, and the tokenize endpoints have no prompt to route.
func (e Endpoint) Tokenizable() (chat, ok bool) {
	switch e {
	case Chat:
		return true, true
	case Completions, Embeddings:
		return false, true
	}
	return false, false
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
	// PromptCacheKey (prompt_cache_key) and User (user) are the body
	// fields that may name a session (SessionKeys.Read).
	PromptCacheKey, User string
	// NVExt is the raw JSON value of the top-level "nvext" member (the
	// reference router's extension, read by the node), a slice of the
	// body; nil when the body has none or it is null. The parse that
	// validates the body finds it, so no caller scans the body again.
	NVExt []byte

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
