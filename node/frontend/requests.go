package frontend

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// Requests builds the routing requests of the node's other edges (the
// selection API and the gateway's endpoint picker) as the frontend builds
// its own: the same body parser and limits, the same exact tokenization
// of text prompts, the same session keys, pin headers, policy class,
// nvext and priority headers. A request is keyed, tokenized and hinted
// alike whichever edge routes it, so that its session binds to the same
// key and its prompt matches the same blocks.
//
// Concurrency: safe for concurrent use.
type Requests struct {
	keys      oaiedge.SessionKeys
	maxPrompt int
	prompts   *prompts
}

// NewRequests builds the request builder of cfg (its session keys,
// prompt limit and tokenizers); m and log may be nil.
func NewRequests(cfg Config, m *metrics.Metrics, log *slog.Logger) (*Requests, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	keys, err := cfg.Edge.SessionKeys.Validate()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Requests{keys: keys, maxPrompt: cfg.MaxPromptTokens, prompts: newPrompts(cfg.Tokenizers, m, log)}, nil
}

// OpenAI parses body as a request of ep and builds its routing request
// with id, the headers' session, pin, class and priorities, and arrival.
// The request's token ids are lent from a pool: release gives them back
// once the request is no longer used (after Route or Select returned).
// A refusal is an oaiedge error or a dispatch sentinel, classified by
// ErrorRows and oaiedge's table.
func (q *Requests) OpenAI(id string, ep oaiedge.Endpoint, body []byte, h http.Header, arrival time.Time) (req *dispatch.Request, release func(), err error) {
	p, err := parseRequest(body, ep, q.maxPrompt)
	if err != nil {
		return nil, nil, err
	}
	q.prompts.exact(p, ep, body)
	ext, err := ParseNVExt(p.NVExt)
	if err == nil {
		req, err = buildRequest(q.keys, h, p, ext, id, arrival)
	}
	if err != nil {
		p.Release()
		return nil, nil, err
	}
	return req, p.Release, nil
}

// Prompt is a prompt given outside an OpenAI body.
type Prompt struct {
	Model string
	// Tokens are the prompt's token ids; nil when Text is the prompt, a
	// completions prompt, which the model's tokenizer encodes as the
	// engine will (text-chunk routing without one).
	Tokens []uint32
	Text   string
	// LoRA and CacheSalt seed the block hashes.
	LoRA, CacheSalt string
	// Hints are what a body's nvext would carry.
	Hints NVExt
}

// Prompt builds the routing request of pr, as OpenAI does for a body:
// the headers give the session (no body fields here), pin, class and the
// priorities pr.Hints leaves unset.
func (q *Requests) Prompt(id string, pr Prompt, h http.Header, arrival time.Time) (*dispatch.Request, error) {
	if err := pr.Hints.validate(); err != nil {
		return nil, err
	}
	p := &oaiedge.Request{Endpoint: oaiedge.Completions, Model: pr.Model, Tokens: pr.Tokens, Text: pr.Text,
		LoRA: pr.LoRA, CacheSalt: pr.CacheSalt}
	if n := p.PromptTokens(); n > q.maxPrompt {
		return nil, fmt.Errorf("%w: about %d tokens over %d", dispatch.ErrPromptTooLong, n, q.maxPrompt)
	}
	q.prompts.exact(p, oaiedge.Completions, nil)
	return buildRequest(q.keys, h, p, pr.Hints, id, arrival)
}
