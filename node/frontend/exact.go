package frontend

import (
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/tokenize"
)

// prompts gives text prompts the token ids the engine will compute, for
// every edge of the node alike (the frontend, the selection API, the
// endpoint picker); it counts the outcomes and logs the models without a
// tokenizer once.
type prompts struct {
	tokenizers map[string]*tokenize.Tokenizer
	counted    map[string]prometheus.Counter
	log        *slog.Logger
	// approximated holds the models already logged as routed by text
	// blocks for want of a tokenizer.
	approximated sync.Map
}

func newPrompts(tokenizers map[string]*tokenize.Tokenizer, m *metrics.Metrics, log *slog.Logger) *prompts {
	return &prompts{tokenizers: tokenizers, counted: tokenizedCounters(m), log: log}
}

// exactTokens gives a text prompt the token ids the engine will compute,
// when the model has a tokenizer (Config.Tokenizers), by the engine's
// rules (tokenize.EncodeRequest). The request still goes to the engine as the client sent it; only
// routing uses the ids. A model without a tokenizer, or whose template
// refuses the conversation, is routed by its text (routing.TextHashes),
// as before; the first such request of each model is logged. It returns
// the outcome.
func (x *exchange) exactTokens() string { return x.s.prompts.exact(x.p, x.ep, x.body.data) }

// exact is exactTokens for p, parsed from body of ep.
func (ps *prompts) exact(p *oaiedge.Request, ep oaiedge.Endpoint, body []byte) string {
	outcome, err := oaiedge.ExactTokens(p, ep, ps.tokenizers[p.Model], body)
	switch outcome {
	case oaiedge.TokensApproximate:
		_, tokenizable := ep.Tokenizable()
		if _, seen := ps.approximated.LoadOrStore(p.Model, true); tokenizable && !seen && len(ps.tokenizers) > 0 {
			ps.log.Warn("model has no tokenizer configured; its text prompts are routed by text blocks, which do not line up with the engine's token blocks", "model", p.Model)
		}
	case oaiedge.TokensFailed:
		ps.log.Debug("tokenizer refused the prompt; routing by text blocks", "model", p.Model, "err", err)
	}
	if c := ps.counted[outcome]; c != nil {
		c.Inc()
	}
	return outcome
}

// tokenizedCounters resolves kvrouter_frontend_tokenized_total's child of
// every outcome once, so that requests count without a label lookup; nil
// without metrics.
func tokenizedCounters(m *metrics.Metrics) map[string]prometheus.Counter {
	if m == nil {
		return nil
	}
	c := make(map[string]prometheus.Counter, 4)
	for _, o := range []string{oaiedge.TokensExact, oaiedge.TokensClient, oaiedge.TokensApproximate, oaiedge.TokensFailed} {
		c[o] = m.Tokenized.WithLabelValues(o)
	}
	return c
}
