package gateway

import "github.com/kvrouter/kvrouter/internal/oaiedge"

// exactTokens gives a text prompt of a model with a tokenizer the token
// ids its engines compute (oaiedge.ExactTokens), so that its blocks can
// be searched here and in the other DCs' summaries. It reports where the
// tokens came from.
func (g *Gateway) exactTokens(req *oaiedge.Request, ep oaiedge.Endpoint, body []byte) string {
	outcome, err := oaiedge.ExactTokens(req, ep, g.cfg.Tokenizers[req.Model], body)
	if err != nil {
		g.cfg.Log.Debug("tokenizer refused the prompt; no prefix search", "model", req.Model, "err", err)
	}
	return outcome
}
