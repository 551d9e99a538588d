package frontend

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/node/dispatch"
)

// explainer is a router that can show what it sees of a request without
// routing it (dispatch.Dispatcher.Explain).
type explainer interface {
	Explain(ctx context.Context, r *dispatch.Request) (*dispatch.Explanation, error)
}

// explanationView is the answer of POST /v1/route/explain.
type explanationView struct {
	Model string `json:"model"`
	// Tokens says where the prompt's tokens came from: client, exact (the
	// model's tokenizer), approximate (no tokenizer: text chunks) or
	// failed (the tokenizer refused it: text chunks).
	Tokens    string        `json:"tokens"`
	BlockSize int           `json:"block_size"`
	Blocks    int           `json:"blocks"`
	Engines   []engineMatch `json:"engines"`
}

type engineMatch struct {
	Engine string `json:"engine"`
	// CachedBlocks is the cached prefix on the device tier; HostBlocks
	// and DiskBlocks continue it on the lower tiers.
	CachedBlocks int32 `json:"cached_blocks"`
	HostBlocks   int32 `json:"host_blocks"`
	DiskBlocks   int32 `json:"disk_blocks"`
}

// handleExplain answers POST /v1/route/explain: for a completions or chat
// body, the blocks the router hashes and each candidate engine's cached
// prefix, as the index holds it now. It routes, books and binds nothing.
func (s *Server) handleExplain(w http.ResponseWriter, r *http.Request) {
	ex, ok := s.router.(explainer)
	if !ok {
		s.errs.Write(w, oaiedge.ErrNotFound)
		return
	}
	data, hold, err := s.bodies.ReadHeld(w, r, nil)
	if err != nil {
		s.errs.Write(w, err)
		return
	}
	defer hold.Release()
	ep := oaiedge.Completions
	var probe struct {
		Messages json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(data, &probe) == nil && probe.Messages != nil {
		ep = oaiedge.Chat
	}
	x := &exchange{s: s, r: r, ep: ep, body: wrapBody(data)}
	if x.p, err = parseRequest(data, ep, s.cfg.MaxPromptTokens); err != nil {
		s.errs.Write(w, err)
		return
	}
	defer x.p.Release()
	tokens := x.exactTokens()
	req := &dispatch.Request{ID: s.requestID(r), Model: x.p.Model, Tokens: x.p.Tokens, Text: x.p.Text,
		LoRA: x.p.LoRA, CacheSalt: x.p.CacheSalt, Arrival: s.cfg.Now()}
	e, err := ex.Explain(r.Context(), req)
	if err != nil {
		s.errs.Write(w, err)
		return
	}
	v := explanationView{Model: req.Model, Tokens: tokens, BlockSize: e.BlockSize, Blocks: e.Blocks, Engines: []engineMatch{}}
	for _, m := range e.Engines {
		v.Engines = append(v.Engines, engineMatch{Engine: m.Worker.String(), CachedBlocks: m.Overlap.Device,
			HostBlocks: m.Overlap.Host, DiskBlocks: m.Overlap.Disk})
	}
	oaiedge.WriteOK(w, v)
}
