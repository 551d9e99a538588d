package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/index"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// Route implements Router. See the package documentation for the steps.
func (d *Dispatcher) Route(ctx context.Context, r *Request) (*Decision, error) {
	var ph phases
	ph.start = d.cfg.Now()
	if err := d.validate(r); err != nil {
		return nil, err
	}
	d.shared.check(d)
	sc := d.scratch.Get().(*policy.Scratch)
	defer d.scratch.Put(sc)
	q := d.query(r)
	var dec *Decision
	var err error
	if d.queues != nil {
		dec, err = d.routeQueued(ctx, sc, r, &q, &ph)
	} else {
		dec, err = d.attempt(ctx, sc, r, &q, &ph)
	}
	if errors.Is(err, errEngineGone) || errors.Is(err, errByRole) {
		// The chosen engine left the registry between the candidate list
		// and the booking, or the queue found a model served by role; the
		// next attempt reads the registry again.
		dec, err = d.attempt(ctx, sc, r, &q, &ph)
	}
	if err != nil {
		d.obs.decisions.rejected(r.Model, err)
		return nil, err
	}
	ph.scheduled = d.cfg.Now()
	d.obs.overhead(&ph)
	d.obs.hitRate(r.Model, dec.CachedBlocks, dec.Blocks)
	return dec, nil
}

// query is the decision path's view of r.
func (d *Dispatcher) query(r *Request) policy.Query {
	q := policy.Query{ID: r.ID, Model: r.Model, ISLTokens: promptTokens(r), SessionKey: sessionKey(r), SessionFinal: r.SessionFinal,
		Thresholds: d.rt.get(r.Model), OutputTokens: r.OutputTokens}
	q.Overrides.OverlapScoreCredit = r.OverlapScoreCredit
	d.adv.apply(&q)
	q.Pin, q.PrefillPin = r.Pin.policy(), r.PrefillPin.policy()
	if r.Subset != nil {
		q.Allowed = d.allowed(r)
	}
	return q
}

// attempt is one pass of candidates, hashing, matching and the decision.
func (d *Dispatcher) attempt(ctx context.Context, sc *policy.Scratch, r *Request, q *policy.Query, ph *phases) (*Decision, error) {
	ranks, known := d.engines.Workers(r.Model)
	if !known {
		return nil, fmt.Errorf("%w: %q", ErrModelNotFound, r.Model)
	}
	if policy.HasRoles(ranks) {
		return d.routeByRole(ctx, sc, r, q, ph, ranks)
	}
	return d.attemptOn(ctx, sc, r, q, ph, ranks)
}

// attemptOn is one aggregated pass over the given ranks: candidates,
// hashing, matching and the decision.
func (d *Dispatcher) attemptOn(ctx context.Context, sc *policy.Scratch, r *Request, q *policy.Query, ph *phases, ranks []routing.WorkerInfo) (*Decision, error) {
	if err := d.prepareOn(sc, r, q, ph, ranks, true); err != nil {
		return nil, err
	}
	return d.decide(ctx, sc, q)
}

// prepareOn is the candidates among ranks, hashing and matching of one
// aggregated pass; track is d.hashes'.
func (d *Dispatcher) prepareOn(sc *policy.Scratch, r *Request, q *policy.Query, ph *phases, ranks []routing.WorkerInfo, track bool) error {
	q.Ranks = ranks
	if err := d.core.Candidates(sc, q, ph.start); err != nil {
		return mapPolicyError(err)
	}
	if err := d.hashes(sc, r, track); err != nil {
		return err
	}
	ph.hashed = d.cfg.Now()
	d.core.Match(sc)
	ph.matched = d.cfg.Now()
	return nil
}

// validate checks the request at the boundary.
func (d *Dispatcher) validate(r *Request) error {
	switch {
	case r == nil:
		return fmt.Errorf("%w: nil request", ErrBadRequest)
	case r.ID == "":
		return fmt.Errorf("%w: request id is required", ErrBadRequest)
	case r.Model == "":
		return fmt.Errorf("%w: model is required", ErrBadRequest)
	case len(r.SessionID) > MaxSessionIDBytes || len(r.ParentSessionID) > MaxSessionIDBytes:
		return fmt.Errorf("%w: session id over %d bytes", ErrSessionLimit, MaxSessionIDBytes)
	case !(r.Priority >= 0) || r.Priority > MaxPriority:
		return fmt.Errorf("%w: priority must be in [0, %g], got %v", ErrBadRequest, float64(MaxPriority), r.Priority)
	case r.StrictPriority < 0:
		return fmt.Errorf("%w: strict priority %d < 0", ErrBadRequest, r.StrictPriority)
	case r.OutputTokens < 0:
		return fmt.Errorf("%w: expected output tokens %d < 0", ErrBadRequest, r.OutputTokens)
	case r.OverlapScoreCredit != nil && (!(*r.OverlapScoreCredit >= 0) || math.IsInf(*r.OverlapScoreCredit, 1)):
		return fmt.Errorf("%w: overlap score credit must be >= 0 and finite, got %v", ErrBadRequest, *r.OverlapScoreCredit)
	}
	if n := promptTokens(r); n > d.cfg.MaxPromptTokens {
		return fmt.Errorf("%w: %d tokens over %d", ErrPromptTooLong, n, d.cfg.MaxPromptTokens)
	}
	return nil
}

// promptTokens is the prompt's length in tokens, estimated for text.
func promptTokens(r *Request) int {
	if r.Tokens != nil {
		return len(r.Tokens)
	}
	return (len(r.Text) + TextBytesPerToken - 1) / TextBytesPerToken
}

// sessionKey is the binding key of a request: a session group shares its
// parent's binding.
func sessionKey(r *Request) string {
	if r.ParentSessionID != "" {
		return r.ParentSessionID
	}
	return r.SessionID
}

// hash computes the request's block hashes into sc.Hashes: token blocks at
// the candidates' block size, or text chunks when the request has no
// tokens.
func hash(sc *policy.Scratch, r *Request) error {
	var err error
	if r.Tokens != nil {
		sc.Hashes, err = routing.BlockHashes(sc.Hashes[:0], r.Tokens, sc.BlockSize(), routing.Seed(r.LoRA, r.CacheSalt))
	} else {
		sc.Text = true
		sc.Hashes, err = routing.TextHashes(sc.Hashes[:0], r.Text, routing.DefaultTextBlockBytes,
			routing.TextSeed(r.Model, r.LoRA, r.CacheSalt))
	}
	if err != nil {
		return fmt.Errorf("%w: hashing: %w", ErrBadRequest, err)
	}
	return nil
}

// policy is p as the decision path's pin, nil for none.
func (p *Pin) policy() *policy.Pin {
	if p == nil {
		return nil
	}
	return &policy.Pin{Worker: p.Engine, Rank: p.Rank, AnyRank: p.AnyRank}
}

// hashes computes the request's block hashes into sc and, when track is
// set, its keyed tracking identities: Route's passes that book at once
// set it; Select, Explain and the admission queue's passes do not (the
// queue adds them when it books, in decideOnce).
func (d *Dispatcher) hashes(sc *policy.Scratch, r *Request, track bool) error {
	if err := hash(sc, r); err != nil || !track {
		return err
	}
	return d.trackHash(sc, r)
}

// trackHash computes the request's keyed tracking identities when the
// dispatcher has a tracking key (--router-tracking-hash keyed-xxh3-v1):
// the load tracker then books those, while the indexes keep matching the
// public hashes in sc.Hashes, which are what the engines' KV events carry.
// Text prompts are not booked by hash, so they need none.
func (d *Dispatcher) trackHash(sc *policy.Scratch, r *Request) error {
	if d.cfg.TrackingKey == nil || r.Tokens == nil {
		return nil
	}
	s := routing.TrackingScope{Model: r.Model, BlockSize: sc.BlockSize(), CacheSalt: r.CacheSalt, LoRA: r.LoRA}
	var err error
	if sc.TrackHashes, err = d.cfg.TrackingKey.SeqHashes(sc.TrackHashes[:0], r.Tokens, s); err != nil {
		return fmt.Errorf("%w: tracking hashes: %w", ErrBadRequest, err)
	}
	sc.Keyed = true
	return nil
}

// sharedNotice tells the operator, once, at the first request, that the
// shared-cache credit (KVConfig.SharedCacheMultiplier) has no source:
// kvrouter learns the shared store's blocks from the engines' KV events
// (routing.TierShared), and when no engine has reported one by then the
// credit changes no decision. Without this an operator who set the
// multiplier would believe it works. A later first report is not
// announced: the credit then simply applies.
type sharedNotice struct {
	once sync.Once
	idx  *index.Exact // nil in approximate mode
}

// check logs the notice at the first call when it applies.
func (n *sharedNotice) check(d *Dispatcher) {
	n.once.Do(func() {
		mult := d.cfg.KV.SharedCacheMultiplier
		if n.idx == nil || mult == 0 || n.idx.Stats().SharedPairs > 0 {
			return
		}
		d.log.Warn("no engine has reported a block on a shared KV tier: the shared-cache credit changes no decision until one does",
			"shared_cache_multiplier", mult, "media", "EXTERNAL, SHARED, REMOTE or NETWORK")
	})
}
