package frontend

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvrouter/kvrouter/internal/metrics"
)

// Tokenization outcomes, the values of kvrouter_frontend_tokenized_total's
// outcome label.
const (
	tokenizedExact       = "exact"       // the model's tokenizer gave the ids
	tokenizedClient      = "client"      // the client sent token ids
	tokenizedApproximate = "approximate" // no tokenizer: text blocks
	tokenizedFailed      = "failed"      // the tokenizer refused (a template error): text blocks
)

// exactTokens gives a text prompt the token ids the engine will compute,
// when the model has a tokenizer (Config.Tokenizers), by the engine's
// rules (tokenize.EncodeRequest). The request still goes to the engine as the client sent it; only
// routing uses the ids. A model without a tokenizer, or whose template
// refuses the conversation, is routed by its text (routing.TextHashes),
// as before; the first such request of each model is logged. It returns
// the outcome.
func (x *exchange) exactTokens() string {
	p := x.p
	if p.Tokens != nil {
		x.s.tokenized(tokenizedClient)
		return tokenizedClient
	}
	chat, ok := x.ep.Tokenizable()
	tok := x.s.cfg.Tokenizers[p.Model]
	if !ok || tok == nil {
		if _, seen := x.s.approximated.LoadOrStore(p.Model, true); ok && !seen && len(x.s.cfg.Tokenizers) > 0 {
			x.s.log.Warn("model has no tokenizer configured; its text prompts are routed by text blocks, which do not line up with the engine's token blocks", "model", p.Model)
		}
		x.s.tokenized(tokenizedApproximate)
		return tokenizedApproximate
	}
	ids, err := tok.EncodeRequest(x.body.data, chat, p.Text, make([]uint32, 0, len(x.body.data)/4+8))
	if err != nil {
		x.s.log.Debug("tokenizer refused the prompt; routing by text blocks", "model", p.Model, "err", err)
		x.s.tokenized(tokenizedFailed)
		return tokenizedFailed
	}
	p.Tokens, p.Text = ids, ""
	x.s.tokenized(tokenizedExact)
	return tokenizedExact
}

func (s *Server) tokenized(outcome string) {
	if c := s.tokenizedBy[outcome]; c != nil {
		c.Inc()
	}
}

// tokenizedCounters resolves kvrouter_frontend_tokenized_total's child of
// every outcome once, so that requests count without a label lookup; nil
// without metrics.
func tokenizedCounters(m *metrics.Metrics) map[string]prometheus.Counter {
	if m == nil {
		return nil
	}
	c := make(map[string]prometheus.Counter, 4)
	for _, o := range []string{tokenizedExact, tokenizedClient, tokenizedApproximate, tokenizedFailed} {
		c[o] = m.Tokenized.WithLabelValues(o)
	}
	return c
}
