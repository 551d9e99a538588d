package frontend

import (
	"time"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// observation is what the frontend saw of an engine's answer.
type observation struct {
	// firstToken and lastToken time the first and last content events.
	firstToken, lastToken time.Time
	// chunks counts content events (a fallback output token count).
	chunks int
	// promptTokens and completionTokens come from the usage object, -1
	// when the engine sent none.
	promptTokens, completionTokens int
	// cachedTokens is usage.prompt_tokens_details.cached_tokens, the
	// prompt tokens the engine found in its prefix cache; hasCached says
	// whether the engine sent it.
	cachedTokens int
	hasCached    bool
	sawDone      bool
	// streamError reports an error event from the engine.
	streamError bool
}

// outputTokens is the usage count when present, else the content events.
func (o *observation) outputTokens() int {
	if o.completionTokens >= 0 {
		return o.completionTokens
	}
	return o.chunks
}

// record updates the request metrics of a finished exchange.
func (x *exchange) record() {
	if x.s.metrics == nil {
		return
	}
	m := x.s.observers.forModel(x.model)
	m.requests[x.ep][outcomeIndex(x.status)].Inc()
	x.recordServing(m)
	if x.model == "" || x.dec == nil {
		return
	}
	o := &x.obs
	in := x.p.PromptTokens()
	if o.promptTokens > 0 {
		in = o.promptTokens
	}
	m.input.Observe(float64(in))
	if x.status >= 400 {
		return
	}
	m.output.Observe(float64(o.outputTokens()))
	if !x.p.Stream || o.chunks == 0 {
		return
	}
	m.ttft.Observe(o.firstToken.Sub(x.start).Seconds())
	if o.chunks > 1 {
		itl := o.lastToken.Sub(o.firstToken) / time.Duration(o.chunks-1)
		m.itl.Observe(itl.Seconds())
	}
}

// inspectChunk reads what the metrics need from one streamed JSON chunk
// (or a whole non-streaming response): whether it carries generated
// content, its usage, and whether it is an error. A chunk that does not
// parse is passed through uninspected.
func (o *observation) inspectChunk(data []byte) (content bool) {
	var s oaiedge.Scanner
	s.Seek(data, 0)
	_ = s.Object(func(key []byte) error {
		switch string(key) {
		case "choices":
			return s.Array(func(int) error {
				return s.Object(func(key []byte) error {
					if string(key) == "delta" || string(key) == "message" {
						return s.Object(func(key []byte) error {
							if hasText(&s, key, "content", "reasoning_content", "tool_calls") {
								content = true
							}
							return nil
						})
					}
					if hasText(&s, key, "text") {
						content = true
					}
					return nil
				})
			})
		case "usage":
			return o.usage(&s)
		case "error":
			o.streamError = true
		}
		return s.Skip()
	})
	return content
}

// hasText consumes the value of key and reports whether key is one of
// names with a non-empty string or array value.
func hasText(s *oaiedge.Scanner, key []byte, names ...string) bool {
	v, err := s.Raw()
	for _, n := range names {
		if string(key) == n {
			return err == nil && len(v) > 2 && (v[0] == '"' || v[0] == '[')
		}
	}
	return false
}

// usage reads a usage object (or null).
func (o *observation) usage(s *oaiedge.Scanner) error {
	if s.Null() {
		return nil
	}
	return s.Object(func(key []byte) error {
		switch string(key) {
		case "prompt_tokens":
			v, err := s.Uint(1 << 31)
			o.promptTokens = int(v)
			return err
		case "completion_tokens":
			v, err := s.Uint(1 << 31)
			o.completionTokens = int(v)
			return err
		case "prompt_tokens_details":
			return o.promptDetails(s)
		}
		return s.Skip()
	})
}
