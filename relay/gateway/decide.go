package gateway

import (
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/relay/consumer"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/routing"
)

// scratch is a request's reusable decision buffers.
type scratch struct {
	hashes  []routing.SeqHash
	results []consumer.Result
}

// scratchPool recycles decision buffers across requests.
var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// decide applies the policy to a parsed request at now: block hashes in
// the model's domain, the exact local depth, then the remote lane that
// beats the local DC by the most, if one does. A request without token
// ids has no hashes; it then has depth 0 everywhere and stays local
// unless the load terms say otherwise.
func (g *Gateway) decide(r *oaiedge.Request, now time.Time, sc *scratch) Choice {
	dom, local := g.localCandidate(r, sc)
	p := g.cfg.Policy
	bs := int(dom.BlockSize)
	ch := p.local(local, bs)
	if g.cfg.RemoteIndex == nil || p.LocalOnly {
		return ch
	}
	o := consumer.Objective{Slope: p.slope(bs), Intercept: g.intercept}
	if r, _, ok := g.cfg.RemoteIndex.Best(dom, sc.hashes, now, o, p.minGain(ch.Local)); ok {
		ch.Best, ch.Remote = p.remote(r, bs, g.remoteRTT), true
		g.metrics.ForwardDepth.Observe(float64(r.Depth))
	}
	return ch
}

// explain is decide with every remote lane's depth, left in sc.results.
func (g *Gateway) explain(r *oaiedge.Request, now time.Time, sc *scratch) Choice {
	dom, local := g.localCandidate(r, sc)
	sc.results = sc.results[:0]
	if g.cfg.RemoteIndex != nil {
		sc.results = g.cfg.RemoteIndex.Query(sc.results, dom, sc.hashes, now)
	}
	return g.cfg.Policy.Choose(local, sc.results, int(dom.BlockSize), g.remoteRTT)
}

// localCandidate hashes the request into sc.hashes and returns its
// domain and the local DC's candidate: the exact local depth and load.
func (g *Gateway) localCandidate(r *oaiedge.Request, sc *scratch) (producer.Domain, Candidate) {
	bs := g.blockSize(r.Model)
	dom := producer.Domain{Model: r.Model, BlockSize: uint32(bs), HashScheme: producer.HashSchemeXXH3Chain,
		HashSeed: routing.Seed(r.LoRA, r.CacheSalt)}
	// The block size is validated positive at New, so BlockHashes cannot
	// fail here.
	sc.hashes, _ = routing.BlockHashes(sc.hashes[:0], r.Tokens, bs, dom.HashSeed)
	local := Candidate{DC: g.cfg.DC}
	if g.cfg.LocalIndex != nil && len(sc.hashes) > 0 {
		local.Depth = g.cfg.LocalIndex.Depth(r.Model, sc.hashes)
	}
	if g.cfg.LocalLoad != nil {
		local.Load = g.cfg.LocalLoad()
	}
	return dom, local
}

// remoteRTT returns a configured remote DC's round trip.
func (g *Gateway) remoteRTT(dc string) (time.Duration, bool) {
	r, ok := g.remotes[dc]
	return r.WANRTT, ok
}

// blockSize returns the model's block size.
func (g *Gateway) blockSize(model string) int {
	if bs, ok := g.blocks[model]; ok {
		return bs
	}
	return g.cfg.DefaultBlockSize
}
