package gateway

import (
	"net/http"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// explanation is the answer of POST /v1/route/explain: what the gateway
// would do with a completions request, without serving it.
type explanation struct {
	Model string `json:"model"`
	// Tokens says where the prompt's tokens came from: "client" (token
	// ids in the request), "exact" (the model's tokenizer), "approximate"
	// (a text prompt of a model without a tokenizer: no blocks to search)
	// or "failed" (the tokenizer refused it).
	Tokens string `json:"tokens"`
	// Blocks is the request's block count at its pool's block size.
	Blocks int `json:"blocks"`
	// DC is the DC the prefix policy chooses (sessions aside).
	DC     string      `json:"dc"`
	Remote bool        `json:"remote"`
	Local  candidateJS `json:"local"`
	// Remotes are the remote lanes' answers, eligible or not.
	Remotes []remoteJS `json:"remotes"`
}

type candidateJS struct {
	DC        string  `json:"dc"`
	Depth     int     `json:"depth_blocks"`
	BenefitMs float64 `json:"benefit_ms"`
}

type remoteJS struct {
	DC          string  `json:"dc"`
	Ready       bool    `json:"ready"`
	Eligible    bool    `json:"eligible"`
	Depth       int     `json:"depth_blocks"`
	StalenessMs float64 `json:"staleness_ms"`
	Engines     int     `json:"engines"`
	Utilization float64 `json:"utilization"`
}

// handleExplain answers POST /v1/route/explain with the prefix decision
// for a completions body: the local and remote prefix depths, each
// lane's eligibility and the chosen DC. It serves nothing and forwards
// nothing; operators use it to see why a request went where it did.
func (g *Gateway) handleExplain(w http.ResponseWriter, r *http.Request) {
	body, hold, err := g.bodies.ReadHeld(w, r, nil)
	if err != nil {
		errorTable.Write(w, err)
		return
	}
	defer hold.Release()
	req, err := oaiedge.Parse(body, oaiedge.Completions, oaiedge.Options{MaxPromptTokens: g.cfg.MaxPromptTokens})
	if err != nil {
		errorTable.Write(w, err)
		return
	}
	tokens := g.exactTokens(&req, oaiedge.Completions, body)
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	ch := g.explain(&req, g.cfg.Now(), sc)
	out := explanation{Model: req.Model, Tokens: tokens, Blocks: len(sc.hashes), DC: ch.Best.DC, Remote: ch.Remote,
		Local: candidateJS{DC: ch.Local.DC, Depth: ch.Local.Depth, BenefitMs: ch.Local.Benefit}}
	for _, res := range sc.results {
		out.Remotes = append(out.Remotes, remoteJS{DC: res.Pool.DC, Ready: res.Ready, Eligible: g.cfg.Policy.Eligible(res),
			Depth: res.Depth, StalenessMs: float64(res.Staleness.Microseconds()) / 1000, Engines: res.Load.Engines,
			Utilization: res.Load.Utilization})
	}
	oaiedge.WriteOK(w, out)
}
