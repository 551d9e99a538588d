package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/load"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// router is one router node's decision path, as the replay drives it: the
// exact index, the load tracker and a policy pipeline over a fixed fleet.
// Its scratch slices are reused across decisions, as on a real node.
type router struct {
	idx *index.Exact
	// approx replaces idx in approximate mode (no KV events): the router
	// indexes its own decisions with a TTL.
	approx    *index.Approx
	tracker   *load.Tracker
	pipe      *policy.Pipeline
	blockSize int
	infos     []routing.WorkerInfo
	slot      map[routing.Worker]int

	matches  []routing.Match
	all      []routing.Match
	loads    []routing.Load
	cands    []policy.Candidate
	decision policy.Decision
}

func newRouter(name string, cfg Config, infos []routing.WorkerInfo) (*router, error) {
	opts := policy.DefaultOptions(rand.New(rand.NewPCG(cfg.Seed, 0x73696d))) // "sim"
	opts.KV = *cfg.KV
	sel, err := policy.New(name, opts)
	if err != nil {
		return nil, err
	}
	pipe, err := policy.NewPipeline(cfg.Thresholds, sel)
	if err != nil {
		return nil, err
	}
	tracker, err := load.New(load.DefaultConfig(cfg.BlockSize))
	if err != nil {
		return nil, err
	}
	r := &router{idx: index.NewExact(), tracker: tracker, pipe: pipe, blockSize: cfg.BlockSize,
		infos: infos, slot: make(map[routing.Worker]int, len(infos))}
	if cfg.NoKVEvents {
		if r.approx, err = index.NewApprox(index.DefaultApproxConfig()); err != nil {
			return nil, err
		}
	}
	for i, in := range infos {
		r.slot[in.Worker] = i
	}
	return r, nil
}

// route picks an engine for p and books the request on it. It returns the
// chosen engine's slot and how long the decision took on the wall clock.
func (r *router) route(id string, p *Prompt, now time.Time) (int, time.Duration, error) {
	start := time.Now()
	if r.approx != nil {
		r.matches = r.approx.FindMatches(p.Hashes, now, r.matches[:0])
	} else {
		r.matches = r.idx.FindMatches(p.Hashes, r.matches[:0])
	}
	r.all = r.all[:0]
	for _, in := range r.infos {
		r.all = append(r.all, routing.Match{Worker: in.Worker})
	}
	for _, m := range r.matches {
		if i, ok := r.slot[m.Worker]; ok {
			r.all[i].Overlap = m.Overlap
		}
	}
	var err error
	r.loads, err = r.tracker.Potential(r.loads[:0], load.Query{Hashes: p.Hashes, ISLTokens: p.InputTokens}, r.all)
	if err != nil {
		return 0, 0, err
	}
	r.cands = r.cands[:0]
	for i, in := range r.infos {
		r.cands = append(r.cands, policy.Candidate{Info: in, Overlap: r.all[i].Overlap,
			Load: r.loads[i], Active: r.tracker.Active(in.Worker)})
	}
	req := policy.Request{ISLTokens: p.InputTokens, BlockSize: r.blockSize}
	if err := r.pipe.Route(&r.decision, &req, r.cands); err != nil {
		return 0, 0, err
	}
	w := r.decision.Worker
	if r.approx != nil {
		if _, err := r.approx.Record(w, p.Hashes, now); err != nil {
			return 0, 0, err
		}
	}
	took := time.Since(start)
	err = r.tracker.Add(load.Request{ID: id, Worker: w, Hashes: p.Hashes, ISLTokens: p.InputTokens,
		CachedBlocks: int(r.decision.Overlap.Device)}, now)
	if err != nil {
		return 0, 0, fmt.Errorf("booking %s: %w", id, err)
	}
	return r.slot[w], took, nil
}
