package policy

import (
	"math"
	"math/rand/v2"
)

// KVTTFT is the "kv-ttft" selector: the kv cost model recast as the
// request's predicted time to first token, in blocks of prefill, plus a
// price for what a placement costs the requests after it. It picks the
// cheapest candidate, ties broken uniformly at random. The reasons for
// each term, measured on every generated workload and the bundled trace
// (docs/routing-quality.md):
//
//	queue(w)    = active prefill of w without the request, in blocks
//	own(w)      = the request's blocks not cached on w
//	future(w)   = (SessionCredit - 1) * Overlap.Device
//	decode(w)   = DecodeWeight * Load.DecodeBlocks
//	capacity(w) = max(0, Load.DecodeBlocks - Headroom*TotalBlocks)
//	balance(w)  = BalanceWeight * max(0, recent(w) - BalanceLimit*mean(recent))
//	cost(w)     = queue(w) + own(w) - future(w) + decode(w) + capacity(w) + balance(w)
//
// where recent(w) is the prefill, in blocks, that this selector sent to w
// over about its last BalanceWindow decisions (each decision decays every
// sum by 1 - 1/BalanceWindow and adds own to the chosen worker's), and
// mean(recent) is its mean over the candidates. The terms:
//
//   - queue + own is when the request's last prompt token is computed on a
//     FCFS engine: what TTFT is made of. The kv cost model has it too.
//   - decode: the kv model adds every block held by running requests at
//     full weight, as if a held block delayed the request as much as a
//     block to prefill. It hardly does (a decode step costs one token of
//     the batch budget), and the per-decision trace shows that this term
//     is what sends most requests away from the engine holding their
//     prefix. A small weight keeps decode-heavy engines from attracting
//     everything.
//   - capacity: KV held by running requests does matter once it nears the
//     engine's capacity: admission then waits for blocks, and what the
//     request stores evicts other prefixes. The hinge prices that, block
//     for block, beyond Headroom of TotalBlocks.
//   - future: a request that reuses a prefix is usually followed by another
//     that reuses this one (the next turn of a conversation, the next call
//     of an agent); sending it where the prefix is keeps one copy of the
//     session in the fleet instead of two, so the cached blocks are worth
//     more than the prefill they save now.
//   - balance: the terms above see only the prefill still queued, and a
//     session's work arrives later, one turn at a time. On the agentic
//     workload, sessions of one agent type all start where that agent's
//     long shared context is cached, and each then stays where its own
//     context grows: one of eight engines started no session at all, and
//     the busiest computed 1.9 times the mean prefill. The prefill sent
//     over a recent window is what the sessions placed there cost;
//     charging its excess over the mean sends new sessions (and, if far
//     worse, turns) to the engines that did less, at the price of copying
//     a shared context once. The limit is the mean (no dead zone): a dead
//     zone lets sessions pile up before the term acts, and a long session
//     once placed cannot be moved cheaply. Requests that a session
//     binding routes skip the selector, so their prefill is not counted;
//     the sums are this selector's view, one router node's.
//
// It is safe for concurrent use.
type KVTTFT struct {
	cfg  KVTTFTConfig
	rng  lockedRand
	work *recentWork
}

var _ Selector = (*KVTTFT)(nil)

// KVTTFTConfig holds the knobs of the kv-ttft selector.
type KVTTFTConfig struct {
	// SessionCredit is the credit per device-cached prefix block, in
	// blocks: 1 counts only the prefill it saves now. Default 1.5.
	SessionCredit float64
	// DecodeWeight is the cost per block held by running requests.
	// Default 0.1.
	DecodeWeight float64
	// Headroom is the share of an engine's TotalBlocks that running
	// requests may hold before the capacity term counts, in [0, 1].
	// Default 0.9.
	Headroom float64
	// BalanceWeight is the cost per block of recent prefill work beyond
	// BalanceLimit times the candidates' mean; 0 turns the balance term
	// off. Default 0.25.
	BalanceWeight float64
	// BalanceLimit is the share of the candidates' mean recent work a
	// worker may do before the balance term counts, at least 1. Default 1:
	// a dead zone lets the imbalance build up before it acts.
	BalanceLimit float64
	// BalanceWindow is about how many recent decisions the recent work
	// covers (an exponential decay of 1 - 1/BalanceWindow per decision),
	// at least 2. Default 2,000: long enough to span the lives of many
	// sessions, short enough to forget a fleet's past shape.
	BalanceWindow float64
}

// DefaultKVTTFTConfig returns the defaults, chosen by the sweep of
// docs/routing-quality.md.
func DefaultKVTTFTConfig() KVTTFTConfig {
	return KVTTFTConfig{SessionCredit: 1.5, DecodeWeight: 0.1, Headroom: 0.9,
		BalanceWeight: 0.25, BalanceLimit: 1, BalanceWindow: 2000}
}

// Validate reports the first invalid knob, naming its key.
func (c KVTTFTConfig) Validate() error {
	if err := checkRange("session_credit", c.SessionCredit, math.Inf(1)); err != nil {
		return err
	}
	if err := checkRange("decode_weight", c.DecodeWeight, math.Inf(1)); err != nil {
		return err
	}
	if err := checkRange("headroom", c.Headroom, 1); err != nil {
		return err
	}
	return c.validateBalance()
}

// validateBalance checks the balance knobs; the limit and window matter
// only when the term is on.
func (c KVTTFTConfig) validateBalance() error {
	if err := checkRange("balance_weight", c.BalanceWeight, math.Inf(1)); err != nil || c.BalanceWeight == 0 {
		return err
	}
	if !(c.BalanceLimit >= 1) || math.IsInf(c.BalanceLimit, 1) {
		return configError("balance_limit must be >= 1 and finite, got %v", c.BalanceLimit)
	}
	if !(c.BalanceWindow >= 2) || math.IsInf(c.BalanceWindow, 1) {
		return configError("balance_window must be >= 2 and finite, got %v", c.BalanceWindow)
	}
	return nil
}

// NewKVTTFT returns a kv-ttft selector that owns r, or an error wrapping
// ErrInvalidConfig. The zero config means DefaultKVTTFTConfig, so that a
// router configured only by name gets the measured defaults.
func NewKVTTFT(cfg KVTTFTConfig, r *rand.Rand) (*KVTTFT, error) {
	if cfg == (KVTTFTConfig{}) {
		cfg = DefaultKVTTFTConfig()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if r == nil {
		return nil, configError("kv-ttft selector needs a *rand.Rand")
	}
	return &KVTTFT{cfg: cfg, rng: lockedRand{r: r}, work: newRecentWork(cfg.BalanceWindow)}, nil
}

// Name implements Selector.
func (*KVTTFT) Name() string { return NameKVTTFT }

// Select implements Selector: d.Costs receives every candidate's cost and
// d.Reason is "argmin".
func (k *KVTTFT) Select(d *Decision, req *Request, cands []Candidate) error {
	if err := d.start(cands); err != nil {
		return err
	}
	if k.cfg.BalanceWeight == 0 {
		for i := range cands {
			d.Costs = append(d.Costs, k.cfg.cost(req, &cands[i]))
		}
		k.choose(d, cands)
		return nil
	}
	// The balance term reads and writes the recent work under one lock,
	// so that two concurrent decisions do not both see the same idle
	// worker. d.Costs holds each candidate's recent work until its cost
	// replaces it.
	k.work.mu.Lock()
	defer k.work.mu.Unlock()
	slots := k.work.slots(cands)
	var sum float64
	for _, s := range slots {
		v := k.work.value(s)
		d.Costs = append(d.Costs, v)
		sum += v
	}
	limit := k.cfg.BalanceLimit * sum / float64(len(cands))
	for i := range cands {
		d.Costs[i] = k.cfg.cost(req, &cands[i]) + k.cfg.BalanceWeight*max(0, d.Costs[i]-limit)
	}
	k.choose(d, cands)
	k.work.add(slots[d.Index], float64(req.uncached(d.Overlap))/float64(max(req.BlockSize, 1)))
	return nil
}

// choose records the cheapest candidate in d.
func (k *KVTTFT) choose(d *Decision, cands []Candidate) {
	d.choose(cands, argmin(d.Costs, &k.rng), "argmin")
	d.Cost = d.Costs[d.Index]
}

// cost is one candidate's cost; Load.PrefillTokens already holds the
// request's uncached tokens on the candidate (queue + own).
func (c *KVTTFTConfig) cost(req *Request, cand *Candidate) float64 {
	bs := float64(max(req.BlockSize, 1))
	l := cand.Load
	prefill := float64(l.PrefillTokens) / bs
	future := (c.SessionCredit - 1) * float64(cand.Overlap.Device)
	held := float64(l.DecodeBlocks)
	capacity := 0.0
	if total := cand.Info.TotalBlocks; total > 0 { // unknown capacity: no hinge
		capacity = max(0, held-c.Headroom*float64(total))
	}
	return prefill - future + c.DecodeWeight*held + capacity
}
