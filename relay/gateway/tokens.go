package gateway

import "github.com/kvrouter/kvrouter/internal/oaiedge"

// Where a request's tokens came from (explanation.Tokens).
const (
	tokensClient      = "client"
	tokensExact       = "exact"
	tokensApproximate = "approximate"
	tokensFailed      = "failed"
)

// exactTokens gives a text prompt of a model with a tokenizer the token
// ids its engines compute (tokenize.EncodeRequest), so that its blocks can
// be searched here and in the other DCs' summaries; the request is still
// forwarded as the client sent it. It reports where the tokens came from.
func (g *Gateway) exactTokens(req *oaiedge.Request, ep oaiedge.Endpoint, body []byte) string {
	if req.Tokens != nil {
		return tokensClient
	}
	chat, ok := ep.Tokenizable()
	tok := g.cfg.Tokenizers[req.Model]
	if !ok || tok == nil {
		return tokensApproximate
	}
	ids, err := tok.EncodeRequest(body, chat, req.Text, make([]uint32, 0, len(body)/4+8))
	if err != nil {
		g.cfg.Log.Debug("tokenizer refused the prompt; no prefix search", "model", req.Model, "err", err)
		return tokensFailed
	}
	req.Tokens = ids
	return tokensExact
}
