package frontend

import "github.com/kvrouter/kvrouter/internal/oaiedge"

// begin counts the exchange as in flight; record, at finish, ends that.
func (x *exchange) begin() {
	if x.s.metrics != nil {
		x.s.metrics.Serving.InFlight.Inc()
	}
}

// recordServing records what every finished exchange reports, refused or
// served: the end of its time in flight, its duration, and the cache hit
// its engine reported.
func (x *exchange) recordServing(m *modelObservers) {
	x.s.metrics.Serving.InFlight.Dec()
	m.durationOf(x.ep, outcomeIndex(x.status)).Observe(x.s.cfg.Now().Sub(x.start).Seconds())
	o := &x.obs
	if !o.hasCached || o.promptTokens <= 0 {
		return
	}
	cached := min(o.cachedTokens, o.promptTokens)
	m.cached.Add(float64(cached))
	m.hit.Observe(float64(cached) / float64(o.promptTokens))
}

// promptDetails reads usage.prompt_tokens_details (or null): the engine's
// cached_tokens, as vLLM (with --enable-prompt-tokens-details), SGLang and
// OpenAI report it.
func (o *observation) promptDetails(s *oaiedge.Scanner) error {
	if s.Null() {
		return nil
	}
	return s.Object(func(key []byte) error {
		if string(key) != "cached_tokens" {
			return s.Skip()
		}
		if s.Null() {
			return nil
		}
		v, err := s.Uint(1 << 31)
		o.cachedTokens, o.hasCached = int(v), err == nil
		return err
	})
}
