package oaiedge

import "github.com/kvrouter/kvrouter/tokenize"

// Where a request's tokens came from: the outcome label of
// kvrouter_frontend_tokenized_total and the "tokens" of both edges'
// POST /v1/route/explain answers.
const (
	TokensClient      = "client"      // the client sent token ids
	TokensExact       = "exact"       // the model's tokenizer gave the ids
	TokensApproximate = "approximate" // no tokenizer: text blocks
	TokensFailed      = "failed"      // the tokenizer refused (a template error): text blocks
)

// ExactTokens gives a text prompt of ep the token ids its engines
// compute, by their rules (tokenize.EncodeRequest with tok, the model's
// tokenizer; nil for none), so that the edge routes it by the engines'
// own token blocks; the body still goes out as the client sent it. It
// returns where r's tokens came from, and the tokenizer's refusal.
func ExactTokens(r *Request, ep Endpoint, tok *tokenize.Tokenizer, body []byte) (string, error) {
	if r.Tokens != nil {
		return TokensClient, nil
	}
	chat, ok := ep.Tokenizable()
	if !ok || tok == nil {
		return TokensApproximate, nil
	}
	ids, err := tok.EncodeRequest(body, chat, r.Text, make([]uint32, 0, len(body)/4+8))
	if err != nil {
		return TokensFailed, err
	}
	r.Tokens, r.Text = ids, ""
	return TokensExact, nil
}
