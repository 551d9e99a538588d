package selection

import (
	"net/http"
	"strings"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/node/frontend"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// Limits of a SelectRequest beside the prompt's (the frontend's).
const (
	// MaxRequestIDBytes bounds request ids, which name bookings and log
	// lines.
	MaxRequestIDBytes = 256
	// MaxHeaders and MaxHeaderBytes bound the headers map: routing reads
	// a dozen headers of a few hundred bytes at most.
	MaxHeaders     = 64
	MaxHeaderBytes = 16 << 10
)

// openAIPaths are the endpoints an openai prompt may name.
var openAIPaths = map[string]oaiedge.Endpoint{
	"": oaiedge.Chat, oaiedge.Chat.Path(): oaiedge.Chat, oaiedge.Completions.Path(): oaiedge.Completions,
	oaiedge.Embeddings.Path(): oaiedge.Embeddings, oaiedge.Responses.Path(): oaiedge.Responses,
}

// lease is how a built request holds its prompt's tokens: lent from the
// OpenAI parser's pool, which release gives them back to once the request
// is no longer used, or owned (the decoded message's ids, the
// tokenizer's output: release is nil), which a kept selection may then
// keep without copying them.
type lease struct{ release func() }

// lent reports whether the tokens must be given back.
func (l lease) lent() bool { return l.release != nil }

// end gives lent tokens back.
func (l lease) end() {
	if l.release != nil {
		l.release()
	}
}

// request builds the routing request of in with id, through the
// frontend's builder, and says how it holds its tokens.
func (s *Service) request(in *kvrpb.SelectRequest, id string) (*dispatch.Request, lease, error) {
	h, err := headers(in.GetHeaders())
	if err != nil {
		return nil, lease{}, err
	}
	now := s.cfg.Now()
	switch p := in.GetPrompt().(type) {
	case *kvrpb.SelectRequest_Openai:
		return s.openAI(in, p.Openai, h, id)
	case *kvrpb.SelectRequest_Tokens:
		if len(p.Tokens.GetIds()) == 0 {
			return nil, lease{}, oaiedge.Invalid("tokens", "tokens.ids is empty")
		}
		r, err := s.reqs.Prompt(id, prompt(in, p.Tokens.GetIds(), ""), h, now)
		return r, lease{}, err
	case *kvrpb.SelectRequest_Text:
		if p.Text == "" {
			return nil, lease{}, oaiedge.Invalid("text", "text is empty")
		}
		r, err := s.reqs.Prompt(id, prompt(in, nil, p.Text), h, now)
		return r, lease{}, err
	}
	return nil, lease{}, oaiedge.Invalid("prompt", "one of tokens, text and openai is required")
}

// openAI builds the request of an OpenAI body; its nvext carries the
// hints, so the hints field must be unset.
func (s *Service) openAI(in *kvrpb.SelectRequest, o *kvrpb.SelectOpenAI, h http.Header, id string) (*dispatch.Request, lease, error) {
	ep, ok := openAIPaths[o.GetPath()]
	if !ok {
		return nil, lease{}, oaiedge.Invalid("openai.path", "openai.path %q is not a routed endpoint", o.GetPath())
	}
	if in.GetHints() != nil {
		return nil, lease{}, oaiedge.Invalid("hints", "hints go in the openai body's nvext")
	}
	r, release, err := s.reqs.OpenAI(id, ep, o.GetBody(), h, s.cfg.Now())
	if err != nil {
		return nil, lease{}, err
	}
	if m := in.GetModel(); m != "" && m != r.Model {
		release()
		return nil, lease{}, oaiedge.Invalid("model", "model %q differs from the openai body's %q", m, r.Model)
	}
	return r, lease{release: release}, nil
}

// prompt is the frontend's Prompt of in.
func prompt(in *kvrpb.SelectRequest, tokens []uint32, text string) frontend.Prompt {
	hints := in.GetHints()
	p := frontend.Prompt{Model: in.GetModel(), Tokens: tokens, Text: text, LoRA: hints.GetLora(), CacheSalt: hints.GetCacheSalt()}
	if hints == nil {
		return p
	}
	a := &p.Hints.AgentHints
	if hints.OverlapScoreCredit != nil {
		a.OverlapScoreCredit = new(hints.GetOverlapScoreCredit())
	}
	if hints.Priority != nil {
		a.Priority = new(hints.GetPriority())
	}
	if hints.StrictPriority != nil {
		a.StrictPriority = new(int64(hints.GetStrictPriority()))
	}
	if n := hints.GetOutputTokens(); n > 0 {
		a.OSL = new(int64(n))
	}
	return p
}

// headers is the headers map as an http.Header, bounded.
func headers(m map[string]string) (http.Header, error) {
	if len(m) > MaxHeaders {
		return nil, oaiedge.Invalid("headers", "over %d headers", MaxHeaders)
	}
	h, n := make(http.Header, len(m)), 0
	for k, v := range m {
		n += len(k) + len(v)
		h.Set(k, v)
	}
	if n > MaxHeaderBytes {
		return nil, oaiedge.Invalid("headers", "headers over %d bytes", MaxHeaderBytes)
	}
	return h, nil
}

// requestID is in's request id, or a new one.
func (s *Service) requestID(in *kvrpb.SelectRequest) (string, error) {
	id := in.GetRequestId()
	if id == "" {
		return "sel-" + newID(), nil
	}
	return id, CheckRequestID(id)
}

// CheckRequestID refuses a request id over MaxRequestIDBytes or not
// printable ASCII without spaces: ids name bookings and log lines. The
// endpoint picker holds Envoy's ids to the same rule.
func CheckRequestID(id string) error {
	if len(id) > MaxRequestIDBytes {
		return oaiedge.Invalid("request_id", "request_id over %d bytes", MaxRequestIDBytes)
	}
	if strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return oaiedge.Invalid("request_id", "request_id must be printable ASCII without spaces")
	}
	return nil
}
