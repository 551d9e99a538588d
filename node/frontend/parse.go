package frontend

import "github.com/kvrouter/kvrouter/internal/oaiedge"

// parseRequest parses the body of ep with the node's limits, into a
// pooled token buffer that Release gives back. A refusal is an
// *oaiedge.Error, which the error table maps.
func parseRequest(body []byte, ep oaiedge.Endpoint, limit int) (*oaiedge.Request, error) {
	return oaiedge.ParsePooled(body, ep, oaiedge.Options{MaxPromptTokens: limit, TextBytesPerToken: TextBytesPerToken})
}
