package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/load"
	"github.com/kvrouter/kvrouter/routing/policy"
)

// scratch is one Route call's reusable memory, pooled so that the hot path
// allocates only what outlives the call.
type scratch struct {
	hashes  []routing.SeqHash
	exact   []routing.Match
	side    []routing.Match
	matches []routing.Match
	all     []routing.Match
	loads   []routing.Load
	cands   []policy.Candidate
	dec     policy.Decision
	preq    policy.Request
	pin     policy.Pin
	plan    plan
}

// plan is what Route learned about a request before choosing.
type plan struct {
	now       time.Time
	tracker   *load.Tracker
	blockSize int
	// isl is the prompt length in tokens (estimated for text).
	isl int
	// text is set when the prompt is routed by text-chunk hashing.
	text bool
	// blocks is the prompt's complete blocks of blockSize tokens.
	blocks int
}

// Route implements Router. See the package documentation for the steps.
func (d *Dispatcher) Route(ctx context.Context, r *Request) (*Decision, error) {
	var ph phases
	ph.start = d.cfg.Now()
	if err := d.validate(r); err != nil {
		return nil, err
	}
	d.maybeExpire(ph.start)
	sc := d.scratch.Get().(*scratch)
	defer d.scratch.Put(sc)
	p := &sc.plan
	*p = plan{now: ph.start}
	dec, err := d.attempt(ctx, sc, r, &ph)
	if errors.Is(err, errEngineGone) {
		// The chosen engine left the registry between the candidate list
		// and the booking; the next attempt reads the registry again.
		*p = plan{now: ph.start}
		dec, err = d.attempt(ctx, sc, r, &ph)
	}
	if err != nil {
		return nil, err
	}
	ph.scheduled = d.cfg.Now()
	d.obs.overhead(&ph)
	d.obs.hitRate(r.Model, dec.CachedBlocks, dec.Blocks)
	return dec, nil
}

// attempt is one pass of candidates, hashing, matching and the decision.
func (d *Dispatcher) attempt(ctx context.Context, sc *scratch, r *Request, ph *phases) (*Decision, error) {
	if err := d.collect(sc, r); err != nil {
		return nil, err
	}
	if err := d.hash(sc, r); err != nil {
		return nil, err
	}
	ph.hashed = d.cfg.Now()
	d.match(sc, r)
	ph.matched = d.cfg.Now()
	return d.decide(ctx, sc, r)
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

// collect fills sc.cands with the live ranks serving the model at the
// model's block size, sorted by worker, and resolves the tracker.
func (d *Dispatcher) collect(sc *scratch, r *Request) error {
	ranks, known := d.engines.Workers(r.Model)
	if !known {
		return fmt.Errorf("%w: %q", ErrModelNotFound, r.Model)
	}
	bs := d.cfg.BlockSize
	if bs == 0 && len(ranks) > 0 {
		bs = ranks[0].BlockSize
	}
	sc.cands = sc.cands[:0]
	suspected := 0
	for _, in := range ranks {
		switch {
		case in.BlockSize != bs:
		case d.suspects.has(in.Worker.ID, sc.plan.now):
			suspected++
		default:
			sc.cands = append(sc.cands, policy.Candidate{Info: in})
		}
	}
	if r.Pin != nil && suspected > 0 && d.suspects.has(r.Pin.Engine, sc.plan.now) {
		// The pin names a registered engine, so the client is not at
		// fault: the engine is unavailable, as one that left would be.
		return fmt.Errorf("%w: pinned engine %d was unreachable in the last %v", ErrNoEngine, r.Pin.Engine, d.cfg.SuspectTimeout)
	}
	if len(sc.cands) == 0 {
		if suspected > 0 {
			return fmt.Errorf("%w: every rank serving %q was unreachable in the last %v", ErrNoEngine, r.Model, d.cfg.SuspectTimeout)
		}
		return fmt.Errorf("%w: no live rank serves %q at block size %d", ErrNoEngine, r.Model, bs)
	}
	sortCandidates(sc.cands)
	t, err := d.tracker(bs)
	if err != nil {
		return fmt.Errorf("%w: block size %d: %w", ErrNoEngine, bs, err)
	}
	sc.plan.tracker, sc.plan.blockSize = t, bs
	sc.plan.isl = promptTokens(r)
	sc.plan.blocks = sc.plan.isl / bs
	return nil
}

// hash computes the request's block hashes into sc.hashes: token blocks at
// the workers' block size, or text chunks when the request has no tokens.
func (d *Dispatcher) hash(sc *scratch, r *Request) error {
	var err error
	if r.Tokens != nil {
		sc.hashes, err = routing.BlockHashes(sc.hashes[:0], r.Tokens, sc.plan.blockSize, routing.Seed(r.LoRA, r.CacheSalt))
	} else {
		sc.plan.text = true
		sc.hashes, err = routing.TextHashes(sc.hashes[:0], r.Text, routing.DefaultTextBlockBytes,
			routing.TextSeed(r.Model, r.LoRA, r.CacheSalt))
	}
	if err != nil {
		return fmt.Errorf("%w: hashing: %w", ErrBadRequest, err)
	}
	return nil
}
