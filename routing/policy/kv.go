package policy

import (
	"fmt"
	"math/rand/v2"
)

// KV is the KV-cache-aware selector: it scores every candidate with the
// cost model of KVConfig.Costs and picks the cheapest (temperature 0) or
// samples by softmax over normalised costs (temperature > 0). It is safe
// for concurrent use.
type KV struct {
	cfg KVConfig
	rng lockedRand
}

var _ Selector = (*KV)(nil)

// NewKV returns a KV selector that owns r. It returns an error wrapping
// ErrInvalidConfig for an invalid cfg or a nil r.
func NewKV(cfg KVConfig, r *rand.Rand) (*KV, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if r == nil {
		return nil, configError("kv selector needs a *rand.Rand")
	}
	return &KV{cfg: cfg, rng: lockedRand{r: r}}, nil
}

// Name implements Selector.
func (*KV) Name() string { return NameKV }

// Config returns the selector's configuration, before request overrides.
func (k *KV) Config() KVConfig { return k.cfg }

// Select implements Selector. d.Costs receives every candidate's cost and
// d.Reason is "argmin" or "sampled". Request overrides apply to this call
// only; an invalid one is ErrInvalidRequest.
func (k *KV) Select(d *Decision, req *Request, cands []Candidate) error {
	if err := d.start(cands); err != nil {
		return err
	}
	cfg := k.cfg
	if !req.Overrides.empty() {
		if err := req.Overrides.validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
		cfg = req.Overrides.apply(cfg)
	}
	d.Costs = cfg.Costs(d.Costs, req, cands)
	if cfg.Temperature > 0 {
		d.choose(cands, softmax(d.Costs, cfg.Temperature, &k.rng), "sampled")
	} else {
		d.choose(cands, argmin(d.Costs, &k.rng), "argmin")
	}
	i := d.Index
	d.Cost = d.Costs[i]
	return nil
}
